"""Rules of a push queue that behaves like the managed one (the embedded queue obeys them).

Limits as Infrai documents them to its clients: 256 KB messages, delays up to 7 days, 30
days of retention, a 5-minute idempotency-key dedup window; the queue-name and key lengths
are our own bounds. ``check_publishable`` is the one answer to "would the queue accept this
message?": every publisher (memory, embedded, Infrai) asks it before storing or sending
anything, so a message refused by one is refused by all. How the
queue treats the subscriber's answer is left open by the vendor; the embedded queue
chooses: 2xx acknowledges, anything else (or no answer) is a failed delivery, redelivered
after the answer's ``Retry-After`` or else capped exponential backoff with full jitter.
Every delivery counts toward ``max_retries`` (also one whose dispatcher died before
answering), so a message is delivered at most ``max_retries + 1`` times before it moves to
the queue's dead-letter list.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from .errors import PublishError
from .messages import OutgoingMessage
from .ports import MAX_MESSAGE_BYTES, QueuePublisher
from .retry import BackoffPolicy, RandomSource

MAX_DELAY_SECONDS = 7 * 24 * 3600.0
RETENTION = timedelta(days=30)
DEDUP_WINDOW = timedelta(minutes=5)


def message_id_time(now: datetime) -> str:
    """The first 48 bits of a message id published at ``now``: its Unix time in
    milliseconds, as 12 hex digits (``new_message_id``; the sweep's SQL builds the rest)."""
    return f"{int(now.timestamp() * 1000) & (2**48 - 1):012x}"


def new_message_id(now: datetime, random_bytes: Callable[[int], bytes] = os.urandom) -> str:
    """A fresh message id: a UUIDv7 (RFC 9562), the publish time first and 74 random bits.

    Time-ordered, so the ids of one period sit side by side in the messages' unique index:
    each publish and each claim writes an entry at its growing edge, pages that stay in
    memory, instead of at a random page of the whole index (a random UUID's). Measured in
    SQL, 200,000 inserted beside a million: 27% less CPU and 38% less WAL per message."""
    rand = int.from_bytes(random_bytes(10), "big")
    value = (
        int(message_id_time(now), 16) << 80
        | 0x7 << 76  # version 7
        | (rand >> 62 & 0xFFF) << 64  # rand_a: 12 bits
        | 0b10 << 62  # the RFC's variant
        | rand & (2**62 - 1)  # rand_b: 62 bits
    )
    return str(uuid.UUID(int=value))


MAX_QUEUE_NAME = 200
MAX_IDEMPOTENCY_KEY = 400


def check_publishable(message: OutgoingMessage, *, max_delay_seconds: float) -> None:
    """Raise ``PublishError`` when the managed queue would refuse this message."""
    if not message.queue or len(message.queue) > MAX_QUEUE_NAME:
        raise PublishError(f"queue name must be 1-{MAX_QUEUE_NAME} characters")
    if not 0 <= message.delay_seconds <= max_delay_seconds:
        raise PublishError(
            f"delay_seconds {message.delay_seconds:.0f} outside 0..{max_delay_seconds:.0f}"
        )
    if not message.idempotency_key or len(message.idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise PublishError(f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
    size = len(json.dumps(message.payload, separators=(",", ":")).encode())
    if size > MAX_MESSAGE_BYTES:
        raise PublishError(f"payload of {size} bytes exceeds {MAX_MESSAGE_BYTES}")


def horizon_end(now: datetime, publisher: QueuePublisher) -> datetime:
    """The end of the delivery horizon: the latest due time the queue can take as a delayed
    message at ``now`` (the sweep publishes up to it, schedules materialize up to it)."""
    return now + timedelta(seconds=publisher.max_delay_seconds)


def redelivery_delay(
    attempt: int, retry_after: float | None, policy: BackoffPolicy, rand: RandomSource
) -> float:
    """Seconds before a failed delivery is tried again: Retry-After, else jittered backoff."""
    return policy.rate_limited_delay(attempt, retry_after, rand)


def is_exhausted(attempts: int, max_retries: int) -> bool:
    """True when a failed delivery used the last of its ``max_retries`` redeliveries."""
    return attempts > max_retries
