"""The Google queue kinds (``cloudtasks``, ``pubsub``) built from the settings: publishers,
push formats, and what ``reminders setup`` writes."""

from __future__ import annotations

import os

from app.adapters.channels.http import SharedHttp
from app.adapters.push_formats.cloudtasks import CloudTasksPushFormat
from app.adapters.push_formats.google_oidc import (
    GoogleOidcVerifier,
    OidcRequirements,
    build_oidc_verifier,
)
from app.adapters.push_formats.pubsub import PubSubPushFormat
from app.domain.ports import PushFormat, QueuePublisher
from app.settings import Settings

from .cloudtasks.publisher import CloudTasksPublisher, CloudTasksTarget, cloudtasks_client_factory
from .cloudtasks.setup import CloudTasksRetryPlan, setup_cloudtasks
from .parts import QueueParts
from .pubsub.api import PubSubApi
from .pubsub.publisher import PubSubPublisher
from .pubsub.setup import PubSubSubscriptionPlan, PushAuth, SetupAction, setup_pubsub

CLOUD_TASKS_EMULATOR = "CLOUD_TASKS_EMULATOR_HOST"
PUBSUB_EMULATOR = "PUBSUB_EMULATOR_HOST"  # Google's own variable


def cloudtasks_target(parts: QueueParts) -> CloudTasksTarget:
    """Where tasks go and how each one proves itself, from the settings."""
    settings = parts.settings
    google = settings.google_push
    secrets = parts.push_secrets()
    return CloudTasksTarget(
        project=settings.cloudtasks.project,
        location=settings.cloudtasks.location,
        push_base_url=settings.public_base_url,
        signing_secret=secrets[0] if secrets else None,
        signature_header=settings.push_signature_header,
        oidc_service_account=google.service_account or None,
        oidc_audience=google.audience_for(settings.public_base_url),
    )


def build_cloudtasks_publisher(parts: QueueParts) -> QueuePublisher:
    """Cloud Tasks over gRPC (plain to CLOUD_TASKS_EMULATOR_HOST when it is set)."""
    factory = cloudtasks_client_factory(os.environ.get(CLOUD_TASKS_EMULATOR) or None)
    if parts.clock is None:
        return CloudTasksPublisher(cloudtasks_target(parts), client_factory=factory)
    return CloudTasksPublisher(cloudtasks_target(parts), client_factory=factory, clock=parts.clock)


def pubsub_api(parts: QueueParts) -> PubSubApi:
    """Pub/Sub's REST API (plain HTTP to PUBSUB_EMULATOR_HOST when it is set)."""
    emulator = os.environ.get(PUBSUB_EMULATOR) or None
    return PubSubApi(parts.settings.pubsub.project, parts.shared_http(), emulator_host=emulator)


def build_pubsub_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to the topic named by each message's queue."""
    return PubSubPublisher(pubsub_api(parts))


def oidc_verifier(parts: QueueParts) -> GoogleOidcVerifier | None:
    """Google's push tokens checker, or None when no push service account is configured."""
    settings = parts.settings
    google = settings.google_push
    if not google.service_account:
        return None
    requirements = OidcRequirements(
        audience=google.audience_for(settings.public_base_url),
        service_account=google.service_account,
        certs_url=google.certs_url,
        clock_skew_seconds=google.clock_skew_seconds,
    )
    return build_oidc_verifier(requirements, parts.shared_http())


def build_cloudtasks_push_format(parts: QueueParts) -> PushFormat:
    """OIDC when configured, else our HMAC header over the task body."""
    return CloudTasksPushFormat(
        oidc=oidc_verifier(parts),
        secrets=parts.push_secrets(),
        signature_header=parts.settings.push_signature_header,
    )


def build_pubsub_push_format(parts: QueueParts) -> PushFormat:
    """OIDC when configured, else the ``token`` query parameter."""
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


def cloudtasks_retry_plan(settings: Settings) -> CloudTasksRetryPlan:
    """The retry configuration ``reminders setup --queue cloudtasks`` writes."""
    tasks = settings.cloudtasks
    return CloudTasksRetryPlan(
        max_attempts=tasks.max_attempts,
        min_backoff_seconds=tasks.min_backoff_seconds,
        max_backoff_seconds=tasks.max_backoff_seconds,
        max_doublings=tasks.max_doublings,
    )


async def run_google_setup(kind: str, settings: Settings, http: SharedHttp) -> list[SetupAction]:
    """Create (or align) the ``kind`` resources of every queue name of that kind."""
    queues = sorted(q for q, k in settings.queue_kinds.items() if k == kind)
    parts = QueueParts(settings, http=http)
    if kind == "pubsub":
        return await setup_pubsub(pubsub_api(parts), queues, pubsub_subscription_plan(settings))
    client = cloudtasks_client_factory(os.environ.get(CLOUD_TASKS_EMULATOR) or None)()
    try:
        plan = cloudtasks_retry_plan(settings)
        return await setup_cloudtasks(client, cloudtasks_target(parts), queues, plan)
    finally:
        await client.transport.close()
