"""The embedded queue's pure rules: Retry-After parsing, redelivery delay, exhaustion, limits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import (
    MAX_DELAY_SECONDS,
    check_publishable,
    is_exhausted,
    message_id_time,
    new_message_id,
    redelivery_delay,
)
from app.domain.retry import BackoffPolicy, parse_retry_after

NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)


class FixedRandom:
    """Always the same fraction."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("30", 30.0),
        (" 7 ", 7.0),
        ("0", 0.0),
        ("Mon, 10 Aug 2026 09:02:00 GMT", 120.0),
        ("Mon, 10 Aug 2026 08:00:00 GMT", 0.0),  # a date in the past: now
        ("999999999", 86400.0),  # capped at a day
        (None, None),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("²", None),  # str.isdigit() accepts superscripts; float() does not
    ],
)
def test_retry_after_reads_seconds_or_an_http_date(header, seconds):
    """Delta seconds and HTTP dates are understood; anything else is ignored."""
    assert parse_retry_after(header, NOW) == seconds


def test_a_retry_after_wins_over_backoff_but_never_below_the_floor():
    """With a Retry-After the delay is exactly it (at least the 1 s floor)."""
    policy = BackoffPolicy(base_seconds=10, cap_seconds=600)
    assert redelivery_delay(5, 42.0, policy, FixedRandom(0.99)) == 42.0
    assert redelivery_delay(5, 0.0, policy, FixedRandom(0.99)) == 1.0


def test_without_retry_after_the_delay_is_full_jitter_backoff():
    """No Retry-After: uniform in [0, min(cap, base * 2**(n-1))], floored at 1 s."""
    policy = BackoffPolicy(base_seconds=2, cap_seconds=60)
    assert redelivery_delay(3, None, policy, FixedRandom(0.5)) == 4.0
    assert redelivery_delay(10, None, policy, FixedRandom(0.5)) == 30.0


def test_a_message_is_exhausted_after_max_retries_plus_one_deliveries():
    """max_retries redeliveries are allowed after the first delivery."""
    assert not is_exhausted(3, 3)
    assert is_exhausted(4, 3)
    assert is_exhausted(1, 0)


def _message(**overrides: object) -> OutgoingMessage:
    values: dict = {"queue": "q", "payload": {}, "delay_seconds": 0, "idempotency_key": "k"}
    values.update(overrides)
    return OutgoingMessage(**values)


@pytest.mark.parametrize(
    "overrides",
    [
        {"queue": ""},
        {"queue": "q" * 201},
        {"idempotency_key": ""},
        {"idempotency_key": "k" * 401},
        {"delay_seconds": MAX_DELAY_SECONDS + 1},
        {"delay_seconds": -0.5},
        {"payload": {"x": "y" * 256 * 1024}},
    ],
)
def test_messages_the_managed_queue_would_refuse_are_refused(overrides):
    """Queue name, key, delay and size limits raise PublishError."""
    with pytest.raises(PublishError):
        check_publishable(_message(**overrides), max_delay_seconds=MAX_DELAY_SECONDS)


def test_a_message_at_the_limits_is_accepted():
    """Exactly 7 days of delay and a payload just under 256 KB pass."""
    payload = {"x": "y" * (256 * 1024 - 10)}
    message = _message(payload=payload, delay_seconds=timedelta(days=7).total_seconds())
    check_publishable(message, max_delay_seconds=MAX_DELAY_SECONDS)


def test_a_message_id_is_a_uuid7_of_its_instant_with_the_random_bits_given():
    """RFC 9562's layout: 48 bits of Unix milliseconds, version 7, 12 random bits, the
    variant, 62 random bits; ids of a later millisecond sort after, as text too."""
    at = datetime(2026, 12, 8, 2, 30, 0, 123456, tzinfo=UTC)
    first = new_message_id(at, random_bytes=lambda size: b"\xff" * size)
    parsed = uuid.UUID(first)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == int(at.timestamp() * 1000) == int(message_id_time(at), 16)
    assert parsed.int & (2**62 - 1) == 2**62 - 1 and (parsed.int >> 64) & 0xFFF == 0xFFF
    zeros = new_message_id(at, random_bytes=lambda size: bytes(size))
    assert uuid.UUID(zeros).int & ((2**12 - 1) << 64 | (2**62 - 1)) == 0
    later = new_message_id(at + timedelta(milliseconds=1), random_bytes=lambda size: bytes(size))
    assert first < later
