"""``reminders setup --queue cloudtasks``: one queue per channel queue, idempotently.

Each queue gets a retry configuration that outlasts our own backoff: Cloud Tasks deletes a
task after its last attempt, and our ledger must finish its attempts (or dead-letter the
send itself) first. An existing queue is updated to this configuration. A task that Cloud
Tasks drops anyway is not lost: the sweep republishes any send that is not final once its
message is overdue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as google_errors
from google.cloud import tasks_v2
from google.protobuf import duration_pb2, field_mask_pb2

from app.adapters.queues.pubsub.setup import SetupAction

from .publisher import CloudTasksTarget


@dataclass(frozen=True, slots=True)
class CloudTasksRetryPlan:
    """The retry configuration setup writes on every queue."""

    max_attempts: int = 100
    min_backoff_seconds: int = 10
    max_backoff_seconds: int = 3600
    max_doublings: int = 16


def queue_resource(target: CloudTasksTarget, queue: str, plan: CloudTasksRetryPlan) -> Any:
    """The queue resource setup writes for ``queue``."""
    return tasks_v2.Queue(
        name=target.queue_path(queue),
        retry_config=tasks_v2.RetryConfig(
            max_attempts=plan.max_attempts,
            min_backoff=duration_pb2.Duration(seconds=plan.min_backoff_seconds),
            max_backoff=duration_pb2.Duration(seconds=plan.max_backoff_seconds),
            max_doublings=plan.max_doublings,
        ),
    )


async def setup_cloudtasks(
    client: Any, target: CloudTasksTarget, queues: list[str], plan: CloudTasksRetryPlan
) -> list[SetupAction]:
    """Create each queue, or update its retry configuration when it exists."""
    parent = f"projects/{target.project}/locations/{target.location}"
    actions = []
    for queue in queues:
        resource = queue_resource(target, queue, plan)
        try:
            await client.create_queue(parent=parent, queue=resource)
        except google_errors.AlreadyExists:
            mask = field_mask_pb2.FieldMask(paths=["retry_config"])
            await client.update_queue(queue=resource, update_mask=mask)
            actions.append(SetupAction("queue", queue, "updated"))
            continue
        actions.append(SetupAction("queue", queue, "created"))
    return actions
