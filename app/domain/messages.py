"""Plain data passed between the receiver, the sweep and the adapters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PAYLOAD_VERSION = 1


@dataclass(frozen=True, slots=True)
class DeliveryPayload:
    """What a queue message carries: identifiers only, never a rendered body."""

    reminder_id: str
    channel: str
    schedule_version: int
    # The W3C traceparent of the reminder's trace when tracing is on (optional: a receiver
    # ignores a value it cannot use, and messages without one are as valid as ever).
    traceparent: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The wire form published to the queue."""
        wire: dict[str, Any] = {
            "v": PAYLOAD_VERSION,
            "reminder_id": self.reminder_id,
            "channel": self.channel,
            "schedule_version": self.schedule_version,
        }
        if self.traceparent is not None:
            wire["traceparent"] = self.traceparent
        return wire


@dataclass(frozen=True, slots=True)
class Delivery:
    """One authenticated push from a queue, before its payload is interpreted."""

    queue: str
    message_id: str
    payload: Any
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class PulledMessage:
    """A message a pull consumer leased: the delivery and what the queue needs to settle it
    (an SQS receipt handle, an AMQP message, an Infrai message id)."""

    delivery: Delivery
    receipt: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PushRequest:
    """One push as it reached the route: raw body, headers and query parameters.

    Header lookups are case-insensitive (the web framework's mapping); query parameters
    carry a queue's token where it cannot sign (Pub/Sub without OIDC).
    """

    body: bytes
    headers: Mapping[str, str]
    query: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A message the sweep (or a redrive) asks a queue to deliver later."""

    queue: str
    payload: Mapping[str, Any]
    delay_seconds: float
    idempotency_key: str
    # The customer the reminder belongs to, when the publisher knows it: a queue that
    # orders or groups messages (SQS FIFO's MessageGroupId) groups by it; None: the
    # reminder itself is the group.
    group: str | None = None


@dataclass(frozen=True, slots=True)
class CustomerView:
    """The customer fields the receiver needs at send time."""

    id: str
    email: str | None
    webhook_url: str | None
    time_zone: str
    opted_out_channels: frozenset[str]
    unsubscribed_at: datetime | None
    webhook_disabled_at: datetime | None = None  # the endpoint answered 410 Gone


@dataclass(frozen=True, slots=True)
class ReminderView:
    """The reminder fields the receiver needs at send time."""

    id: str
    customer_id: str
    kind: str
    state: str
    due_at: datetime
    expires_at: datetime | None
    channels: tuple[str, ...]
    data: Mapping[str, Any]
    schedule_version: int


@dataclass(frozen=True, slots=True)
class RenderedMessage:
    """A message ready for a provider: email parts or a webhook JSON body."""

    channel: str
    recipient: str
    subject: str = ""
    text: str = ""
    html: str | None = None
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SendResult:
    """What a provider returned when it accepted a message."""

    provider_request_id: str | None


MAX_ID_LENGTH = 200


def idempotency_key(reminder_id: str, channel: str, schedule_version: int) -> str:
    """The queue idempotency key for one (reminder, channel) at one schedule version."""
    return f"{reminder_id}:{channel}:v{schedule_version}"


MAX_TRACEPARENT_LENGTH = 128  # a W3C traceparent is 55 characters


def parse_delivery_payload(raw: Any, *, channels: frozenset[str]) -> DeliveryPayload:
    """Validate our own message payload; ``MalformedDelivery`` names what is wrong."""
    from .errors import MalformedDelivery  # local: errors imports nothing from here

    if not isinstance(raw, dict):
        raise MalformedDelivery("payload is not a JSON object")
    if raw.get("v") != PAYLOAD_VERSION:
        raise MalformedDelivery(f"payload version {raw.get('v')!r} is not {PAYLOAD_VERSION}")
    reminder_id, channel, version = (
        raw.get("reminder_id"),
        raw.get("channel"),
        raw.get("schedule_version"),
    )
    if (
        not isinstance(reminder_id, str)
        or not 0 < len(reminder_id) <= MAX_ID_LENGTH
        or "\x00" in reminder_id  # no reminder id holds one; PostgreSQL text refuses it
    ):
        raise MalformedDelivery("payload.reminder_id must be a string of 1-200 characters")
    if not isinstance(channel, str) or channel not in channels:
        raise MalformedDelivery(f"payload.channel {channel!r} is not one of {sorted(channels)}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise MalformedDelivery("payload.schedule_version must be a positive integer")
    traceparent = raw.get("traceparent")
    if not isinstance(traceparent, str) or len(traceparent) > MAX_TRACEPARENT_LENGTH:
        traceparent = None  # tracing context is a courtesy: never a reason to refuse
    return DeliveryPayload(reminder_id, channel, version, traceparent)
