"""``reminders setup --queue pubsub``: topics and push subscriptions, idempotently.

For each channel queue: the dead-letter topic ``{queue}{dead_letter_suffix}``, the topic
``{queue}``, and the push subscription ``{queue}{subscription_suffix}`` to
``{PUBLIC_BASE_URL}/push/{queue}`` — with Google's OIDC token when a push service account is
configured, else with ``?token=<first push secret>`` — an ack deadline above our provider
timeout, the retry policy, and the dead-letter policy. Existing topics count as ``exists``;
an existing subscription is patched to this configuration (``updated``).

Dead-lettering needs the Pub/Sub service agent to publish to the dead-letter topic and to
subscribe to the subscription (IAM grants, README); messages it dead-letters are not lost
to us: the sweep republishes any send that is not final once its message is overdue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from .api import PubSubApi, PubSubApiError

ALREADY_EXISTS = 409
NOT_FOUND = 404
SUBSCRIPTION_FIELDS = "pushConfig,ackDeadlineSeconds,retryPolicy,deadLetterPolicy"

Status = Literal["created", "exists", "updated"]


@dataclass(frozen=True, slots=True)
class SetupAction:
    """What setup did to one resource."""

    kind: str
    name: str
    status: Status


@dataclass(frozen=True, slots=True)
class PushAuth:
    """How Pub/Sub proves itself on each push: an OIDC token, else our query token."""

    token: str | None = None
    service_account: str | None = None
    audience: str | None = None


@dataclass(frozen=True, slots=True)
class PubSubSubscriptionPlan:
    """The subscription configuration setup applies to every channel queue."""

    push_base_url: str
    auth: PushAuth
    ack_deadline_seconds: int = 60
    # None: no retry policy (Pub/Sub then redelivers immediately, still capped by attempts).
    min_backoff_seconds: int | None = 10
    max_backoff_seconds: int = 600
    max_delivery_attempts: int = 100
    dead_letter_suffix: str = "-dead"
    subscription_suffix: str = "-push"

    def push_endpoint(self, queue: str) -> str:
        """Our push route for ``queue``, with the token when OIDC is not used."""
        url = f"{self.push_base_url.rstrip('/')}/push/{queue}"
        if self.auth.service_account or not self.auth.token:
            return url
        return f"{url}?token={quote(self.auth.token, safe='')}"


async def setup_pubsub(
    api: PubSubApi, queues: list[str], plan: PubSubSubscriptionPlan
) -> list[SetupAction]:
    """Create (or align) everything the queues need; one action per resource."""
    actions: list[SetupAction] = []
    for queue in queues:
        actions.append(await _ensure_topic(api, queue + plan.dead_letter_suffix))
        actions.append(await _ensure_topic(api, queue))
        actions.append(await _ensure_subscription(api, queue, plan))
    return actions


def subscription_body(api: PubSubApi, queue: str, plan: PubSubSubscriptionPlan) -> dict[str, Any]:
    """The subscription resource setup writes for ``queue``."""
    push_config: dict[str, Any] = {"pushEndpoint": plan.push_endpoint(queue)}
    if plan.auth.service_account:
        push_config["oidcToken"] = {
            "serviceAccountEmail": plan.auth.service_account,
            "audience": plan.auth.audience or plan.push_endpoint(queue),
        }
    body: dict[str, Any] = {
        "topic": api.topic_path(queue),
        "pushConfig": push_config,
        "ackDeadlineSeconds": plan.ack_deadline_seconds,
        "deadLetterPolicy": {
            "deadLetterTopic": api.topic_path(queue + plan.dead_letter_suffix),
            "maxDeliveryAttempts": plan.max_delivery_attempts,
        },
    }
    if plan.min_backoff_seconds is not None:
        body["retryPolicy"] = {
            "minimumBackoff": f"{plan.min_backoff_seconds}s",
            "maximumBackoff": f"{plan.max_backoff_seconds}s",
        }
    return body


async def _ensure_topic(api: PubSubApi, topic: str) -> SetupAction:
    try:
        await api.call("PUT", api.topic_path(topic), {})
    except PubSubApiError as error:
        if error.status != ALREADY_EXISTS:
            raise
        return SetupAction("topic", topic, "exists")
    return SetupAction("topic", topic, "created")


async def _ensure_subscription(
    api: PubSubApi, queue: str, plan: PubSubSubscriptionPlan
) -> SetupAction:
    name = queue + plan.subscription_suffix
    path = api.subscription_path(name)
    body = subscription_body(api, queue, plan)
    try:
        await api.call("PUT", path, body)
    except PubSubApiError as error:
        if error.status != ALREADY_EXISTS:
            raise
        patch = {"subscription": body, "updateMask": SUBSCRIPTION_FIELDS}
        await api.call("PATCH", path, patch)
        return SetupAction("subscription", name, "updated")
    return SetupAction("subscription", name, "created")
