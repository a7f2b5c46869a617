"""Google Pub/Sub built from the settings: publisher, push format, setup."""

from __future__ import annotations

import os

from app.adapters.channels.http import SharedHttp
from app.domain.errors import QueueUnavailable
from app.domain.ports import PushFormat, QueuePublisher
from app.settings import Settings

from ..kind import Report, ToolOptions, setup_report
from ..parts import QueueParts
from .api import PubSubApi, PubSubApiError
from .publisher import PubSubPublisher
from .setup import PubSubSubscriptionPlan, PushAuth, setup_pubsub

PUBSUB_EMULATOR = "PUBSUB_EMULATOR_HOST"  # Google's own variable


def pubsub_api(parts: QueueParts) -> PubSubApi:
    """Pub/Sub's REST API (plain HTTP to PUBSUB_EMULATOR_HOST when it is set)."""
    emulator = os.environ.get(PUBSUB_EMULATOR) or None
    return PubSubApi(parts.settings.pubsub.project, parts.shared_http(), emulator_host=emulator)


def build_pubsub_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to the topic named by each message's queue."""
    return PubSubPublisher(pubsub_api(parts))


def build_pubsub_push_format(parts: QueueParts) -> PushFormat:
    """OIDC when configured, else the ``token`` query parameter."""
    # google-auth (the [gcp] extra) checks the OIDC tokens: imported only here, so setup
    # and check import without it.
    from ..google import oidc_verifier
    from .push_format import PubSubPushFormat

    return PubSubPushFormat(oidc=oidc_verifier(parts), tokens=parts.push_secrets())


def pubsub_subscription_plan(settings: Settings) -> PubSubSubscriptionPlan:
    """The push subscription ``reminders setup --queue pubsub`` writes, from the settings."""
    google, pubsub = settings.google_push, settings.pubsub
    secrets = [secret.get_secret_value() for secret in settings.push_secrets]
    auth = PushAuth(
        token=secrets[0] if secrets else None,
        service_account=google.service_account or None,
        audience=google.audience_for(settings.public_base_url),
    )
    return PubSubSubscriptionPlan(
        settings.public_base_url,
        auth,
        ack_deadline_seconds=pubsub.ack_deadline_seconds,
        min_backoff_seconds=pubsub.min_backoff_seconds or None,
        max_backoff_seconds=pubsub.max_backoff_seconds,
        max_delivery_attempts=pubsub.max_delivery_attempts,
        dead_letter_suffix=pubsub.dead_letter_suffix,
        subscription_suffix=pubsub.subscription_suffix,
    )


async def setup_topics(
    settings: Settings, http: SharedHttp, options: ToolOptions | None = None
) -> Report:
    """Create (or align) the topic, dead-letter topic and push subscription of every queue."""
    queues = settings.queues_of_kind("pubsub")
    parts = QueueParts(settings, http=http)
    try:
        actions = await setup_pubsub(pubsub_api(parts), queues, pubsub_subscription_plan(settings))
        return setup_report("pubsub", actions)
    except PubSubApiError as error:  # what the API refused, said by the CLI in one line
        raise QueueUnavailable(str(error)) from error
