"""Builders of the Google queue kinds (``cloudtasks``, ``pubsub``) from the settings."""

from __future__ import annotations

import os

from app.adapters.push_formats.cloudtasks import CloudTasksPushFormat
from app.adapters.push_formats.google_oidc import (
    GoogleOidcVerifier,
    OidcRequirements,
    build_oidc_verifier,
)
from app.adapters.push_formats.pubsub import PubSubPushFormat
from app.domain.ports import PushFormat, QueuePublisher

from .cloudtasks.publisher import CloudTasksPublisher, CloudTasksTarget, cloudtasks_client_factory
from .parts import QueueParts
from .pubsub.api import PubSubApi
from .pubsub.publisher import PubSubPublisher

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
