"""``reminders check`` for Pub/Sub: what setup should have left in place.

Each queue's topic and push subscription exist, the subscription pushes to our route and
keeps redelivering longer than our own attempts. Credentials and OIDC cannot be proven from
here: the first push does that.
"""

from __future__ import annotations

from typing import Any

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.kind import CheckResult, Report, ToolOptions, check_report
from app.settings import Settings

from ..parts import QueueParts
from .api import PubSubApiError
from .build import pubsub_api, pubsub_subscription_plan
from .setup import subscription_body


async def check_subscriptions(
    settings: Settings, http: SharedHttp, options: ToolOptions | None = None
) -> Report:
    """One result per Pub/Sub queue."""
    queues = settings.queues_of_kind("pubsub")
    parts = QueueParts(settings, http=http)
    return check_report([await _check_subscription(parts, queue) for queue in queues])


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
