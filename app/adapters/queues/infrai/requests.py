"""The exact request bodies we send to Infrai, built in one place.

The publisher, the pull consumer and ``reminders setup-infrai`` send these; ``reminders
check`` validates the same bodies against Infrai's published parameter schemas, so a
check that passes speaks for what production sends.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.domain.messages import OutgoingMessage
from app.domain.queueing import MAX_DELAY_SECONDS


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue as ``setup-infrai`` creates it (a DLQ has no ``dead_letter_queue``)."""

    name: str
    dead_letter_queue: str | None
    max_retries: int
    visibility_timeout: int
    retention_days: int
    type: Literal["standard", "fifo"] = "standard"


def delay_for(message: OutgoingMessage, max_delay: float = MAX_DELAY_SECONDS) -> int:
    """Whole seconds, rounded up (never early), clamped to 0..max_delay."""
    seconds = math.ceil(max(0.0, message.delay_seconds))
    return int(min(seconds, math.floor(max_delay)))


def publish_body(message: OutgoingMessage, max_delay: float = MAX_DELAY_SECONDS) -> dict[str, Any]:
    """``queue.publish``: queue, payload, delay_seconds, idempotency_key (documented fields)."""
    return {
        "queue": message.queue,
        "payload": dict(message.payload),
        "delay_seconds": delay_for(message, max_delay),
        "idempotency_key": message.idempotency_key,
    }


def batch_bodies(
    messages: Sequence[OutgoingMessage],
    *,
    shape: Literal["messages", "per_queue"],
    max_delay: float = MAX_DELAY_SECONDS,
) -> list[tuple[dict[str, Any], list[int]]]:
    """Batch-publish bodies, each with the positions (in ``messages``) it carries.

    ``messages``: ``{"messages": [<publish body>, ...]}`` (one call, any queues).
    ``per_queue``: ``{"queue": q, "messages": [{payload, delay_seconds, idempotency_key}]}``
    (one call per queue), the other shape seen in client code.
    """
    if shape == "messages":
        items = [publish_body(m, max_delay) for m in messages]
        return [({"messages": items}, list(range(len(messages))))]
    groups: dict[str, list[int]] = {}
    for position, message in enumerate(messages):
        groups.setdefault(message.queue, []).append(position)
    bodies = []
    for queue, positions in groups.items():
        items = [publish_body(messages[p], max_delay) for p in positions]
        for item in items:
            del item["queue"]
        bodies.append(({"queue": queue, "messages": items}, positions))
    return bodies


def batch_idempotency_key(body: Mapping[str, Any]) -> str:
    """A stable key for a batch: identical retries of the same batch carry the same key."""
    items = body.get("messages", [])
    joined = "\n".join(str(item.get("idempotency_key", "")) for item in items)
    return "batch:" + hashlib.sha256(f"{body.get('queue', '')}\n{joined}".encode()).hexdigest()[:40]


def create_queue_body(spec: QueueSpec) -> dict[str, Any]:
    """``queue.create`` (documented fields only)."""
    body: dict[str, Any] = {
        "name": spec.name,
        "type": spec.type,
        "max_retries": spec.max_retries,
        "message_retention_days": spec.retention_days,
        "visibility_timeout_default": spec.visibility_timeout,
        "idempotency_key": f"reminder-relay:queue.create:{spec.name}",
    }
    if spec.dead_letter_queue:
        body["dead_letter_queue"] = spec.dead_letter_queue
    return body


def cron_create_body(
    *,
    name: str,
    schedule: str,
    url: str,
    token: str,
    retries: int,
    fields: Literal["documented", "example"] = "documented",
) -> dict[str, Any]:
    """``cron.create``: the sweep URL, with the cron token inside the stored payload.

    The documented parameters are ``schedule``/``url``; the same page's example uses
    ``cron_expr``/``task_type``/``task_url`` (``fields="example"``).
    """
    body: dict[str, Any] = {
        "name": name,
        "payload": {"token": token},
        "timezone": "UTC",
        "retries": retries,
        "idempotency_key": f"reminder-relay:cron.create:{name}",
    }
    if fields == "example":
        body.update({"cron_expr": schedule, "task_type": "http_url", "task_url": url})
    else:
        body.update({"schedule": schedule, "url": url})
    return body


def push_subscribe_body(
    *, url: str, secret: str | None, url_field: str, secret_field: str, queue: str
) -> dict[str, Any]:
    """Push subscription (seen, not documented): the target URL and the signing secret."""
    body: dict[str, Any] = {
        url_field: url,
        "idempotency_key": f"reminder-relay:push_subscribe:{queue}:{url}",
    }
    if secret_field and secret:
        body[secret_field] = secret
    return body


def consume_body(queue: str, *, max_messages: int, visibility_timeout: int) -> dict[str, Any]:
    """``queue.consume`` (seen in client code)."""
    return {"queue": queue, "max_messages": max_messages, "visibility_timeout": visibility_timeout}


def ack_body(queue: str, message_id: str) -> dict[str, Any]:
    """``queue.ack`` (seen in client code)."""
    return {"queue": queue, "message_id": message_id}


def nack_body(queue: str, message_id: str, *, delay: float, delay_field: str) -> dict[str, Any]:
    """Nack (its fields were not seen: the delay's field name is configurable)."""
    body: dict[str, Any] = {"queue": queue, "message_id": message_id}
    if delay_field:
        body[delay_field] = math.ceil(max(0.0, delay))
    return body


def mask_secrets(body: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """A copy safe to print: named fields (also inside ``payload``) replaced by ``***``."""
    masked: dict[str, Any] = {}
    for key, value in body.items():
        if key in names and value:
            masked[key] = "***"
        elif isinstance(value, Mapping):
            masked[key] = mask_secrets(value, names)
        else:
            masked[key] = value
    return masked
