"""Google Cloud Tasks built from the settings: publisher, push format, setup."""

from __future__ import annotations

import os

from google.api_core.exceptions import GoogleAPIError

from app.adapters.channels.http import SharedHttp
from app.domain.errors import QueueUnavailable
from app.domain.ports import PushFormat, QueuePublisher
from app.settings import Settings

from ..google import oidc_verifier
from ..kind import Report, ToolOptions, setup_report
from ..parts import QueueParts
from .publisher import CloudTasksPublisher, CloudTasksTarget, cloudtasks_client_factory
from .push_format import CloudTasksPushFormat
from .setup import CloudTasksRetryPlan, setup_cloudtasks

CLOUD_TASKS_EMULATOR = "CLOUD_TASKS_EMULATOR_HOST"


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


def build_cloudtasks_push_format(parts: QueueParts) -> PushFormat:
    """OIDC when configured, else our HMAC header over the task body."""
    return CloudTasksPushFormat(
        oidc=oidc_verifier(parts),
        secrets=parts.push_secrets(),
        signature_header=parts.settings.push_signature_header,
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


async def setup_queues(
    settings: Settings, http: SharedHttp, options: ToolOptions | None = None
) -> Report:
    """Create (or align) a Cloud Tasks queue for every queue name of this kind."""
    queues = settings.queues_of_kind("cloudtasks")
    parts = QueueParts(settings, http=http)
    client = cloudtasks_client_factory(os.environ.get(CLOUD_TASKS_EMULATOR) or None)()
    try:
        plan = cloudtasks_retry_plan(settings)
        actions = await setup_cloudtasks(client, cloudtasks_target(parts), queues, plan)
        return setup_report("cloudtasks", actions)
    except GoogleAPIError as error:  # what the API refused, said by the CLI in one line
        raise QueueUnavailable(str(error)) from error
    finally:
        await client.transport.close()
