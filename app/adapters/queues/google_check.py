"""``reminders check`` for the Google queues: what setup should have left in place.

Pub/Sub: each queue's topic and push subscription exist, the subscription pushes to our
route and keeps redelivering longer than our own attempts. Cloud Tasks: each queue exists
and retries longer than our own attempts. Credentials and OIDC cannot be proven from here:
the first push does that.
"""

from __future__ import annotations

import os
from typing import Any

from google.api_core import exceptions as google_errors

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.infrai.discovery import CheckResult
from app.settings import Settings
from app.settings.google import GOOGLE_KINDS

from .cloudtasks.publisher import cloudtasks_client_factory
from .google import (
    CLOUD_TASKS_EMULATOR,
    cloudtasks_target,
    pubsub_api,
    pubsub_subscription_plan,
)
from .parts import QueueParts
from .pubsub.api import PubSubApiError
from .pubsub.setup import subscription_body

__all__ = ["GOOGLE_KINDS", "check_google"]


async def check_google(kind: str, settings: Settings, http: SharedHttp) -> list[CheckResult]:
    """One result per queue of ``kind`` (``pubsub`` or ``cloudtasks``)."""
    queues = sorted(q for q, k in settings.queue_kinds.items() if k == kind)
    parts = QueueParts(settings, http=http)
    if kind == "pubsub":
        return [await _check_subscription(parts, queue) for queue in queues]
    client = cloudtasks_client_factory(os.environ.get(CLOUD_TASKS_EMULATOR) or None)()
    try:
        return [await _check_queue(client, parts, queue) for queue in queues]
    finally:
        await client.transport.close()


async def _check_subscription(parts: QueueParts, queue: str) -> CheckResult:
    api, plan = pubsub_api(parts), pubsub_subscription_plan(parts.settings)
    name = f"pubsub subscription {queue}{plan.subscription_suffix}"
    try:
        await api.call("GET", api.topic_path(queue))
        held = await api.call("GET", api.subscription_path(queue + plan.subscription_suffix))
    except PubSubApiError as error:
        return CheckResult(name, "fail", f"{error} (run reminders setup --queue pubsub)")
    return CheckResult(
        name, *_compare_subscription(held, subscription_body(api, queue, plan), parts)
    )


def _compare_subscription(
    held: dict[str, Any], wanted: dict[str, Any], parts: QueueParts
) -> tuple[Any, str]:
    if held.get("pushConfig", {}).get("pushEndpoint") != wanted["pushConfig"]["pushEndpoint"]:
        return "fail", "pushes elsewhere than our push route (run reminders setup)"
    attempts = held.get("deadLetterPolicy", {}).get("maxDeliveryAttempts")
    if attempts is not None and attempts <= parts.settings.max_attempts:
        return "fail", f"dead-letters after {attempts} attempts, before our own attempts end"
    if attempts is None:
        return "warn", "no dead-letter policy: undeliverable pushes are retried for 7 days"
    return "pass", f"pushes to our route, dead-letters after {attempts} attempts"


async def _check_queue(client: Any, parts: QueueParts, queue: str) -> CheckResult:
    path = cloudtasks_target(parts).queue_path(queue)
    name = f"cloudtasks queue {queue}"
    try:
        found = await client.get_queue(name=path)
    except google_errors.GoogleAPIError as error:
        return CheckResult(name, "fail", f"{error} (run reminders setup --queue cloudtasks)")
    attempts = found.retry_config.max_attempts
    if 0 < attempts <= parts.settings.max_attempts:
        return CheckResult(name, "fail", f"gives up after {attempts} attempts, before us")
    return CheckResult(name, "pass", f"exists, max attempts {attempts or 'default'}")
