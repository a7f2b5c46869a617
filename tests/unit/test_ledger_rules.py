"""Pure ledger rules: unclaimed answers, reasons not to send, failure plans, payload parsing."""

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.errors import MalformedDelivery
from app.domain.ledger import (
    LedgerKey,
    SendRecordView,
    answer_unclaimed,
    plan_failure,
    reason_not_to_send,
    seconds_until,
    truncate_error,
    usefulness_deadline,
)
from app.domain.messages import CustomerView, ReminderView, parse_delivery_payload
from app.domain.retry import BackoffPolicy
from app.domain.states import ErrorClass, Outcome, ReminderState, SendState

NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
GRACE = timedelta(hours=24)
CHANNELS = frozenset({"email", "webhook"})


class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def record(state: SendState, **fields) -> SendRecordView:
    values = {
        "id": 1,
        "state": state,
        "attempt_count": 1,
        "attempt_budget_start": 0,
        "lease_until": None,
        "next_attempt_at": None,
    }
    values.update(fields)
    return SendRecordView(**values)


def reminder(**fields) -> ReminderView:
    values = {
        "id": "r1",
        "customer_id": "c1",
        "kind": "weekly_digest",
        "state": ReminderState.ENQUEUED.value,
        "due_at": NOW,
        "expires_at": None,
        "channels": ("email",),
        "data": {},
        "schedule_version": 1,
    }
    values.update(fields)
    return ReminderView(**values)


def customer(**fields) -> CustomerView:
    values = {
        "id": "c1",
        "email": "c1@example.com",
        "webhook_url": None,
        "time_zone": "UTC",
        "opted_out_channels": frozenset(),
        "unsubscribed_at": None,
    }
    values.update(fields)
    return CustomerView(**values)


def test_provider_idempotency_key_is_stable_per_ledger_key():
    """The provider key names reminder, channel and provider, and nothing attempt-specific."""
    key = LedgerKey("digest:c1:2026-W33", "email", "outbox")
    assert key.idempotency_key == "digest:c1:2026-W33:email:outbox"
    assert LedgerKey("digest:c1:2026-W33", "email", "outbox").idempotency_key == key.idempotency_key


def test_attempts_in_budget_count_since_the_last_reset():
    """A reset budget (redrive, reschedule) keeps history but restarts the count."""
    assert (
        record(SendState.PENDING, attempt_count=7, attempt_budget_start=5).attempts_in_budget == 2
    )


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (None, 1.0),
        (NOW - timedelta(seconds=30), 1.0),
        (NOW, 1.0),
        (NOW + timedelta(seconds=0.2), 1.0),
        (NOW + timedelta(seconds=44.1), 45.0),
        (NOW + timedelta(seconds=60), 60.0),
    ],
)
def test_seconds_until_is_whole_seconds_and_at_least_one(moment, expected):
    """Retry-After is a whole number of seconds, rounded up, never below 1."""
    assert seconds_until(moment, NOW) == expected


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        (SendState.SENT, Outcome.DUPLICATE),
        (SendState.TERMINAL_FAILURE, Outcome.TERMINAL),
        (SendState.DEAD, Outcome.DEAD_LETTERED),
    ],
)
def test_final_rows_are_acknowledged(state, outcome):
    """A final row answers with an ack outcome and no retry delay."""
    decision = answer_unclaimed(record(state), NOW)
    assert decision.outcome == outcome
    assert decision.outcome.acknowledges
    assert decision.retry_after is None


def test_live_lease_is_busy_for_the_rest_of_the_lease():
    """A row held by another worker: nack with the lease's remaining seconds."""
    held = record(SendState.SENDING, lease_until=NOW + timedelta(seconds=42))
    decision = answer_unclaimed(held, NOW)
    assert decision.outcome == Outcome.BUSY
    assert decision.retry_after == 42.0


def test_early_redelivery_is_busy_until_the_next_attempt():
    """A pending row whose retry is not due: nack with the remaining wait."""
    waiting = record(SendState.PENDING, next_attempt_at=NOW + timedelta(seconds=17.5))
    decision = answer_unclaimed(waiting, NOW)
    assert decision.outcome == Outcome.BUSY
    assert decision.retry_after == 18.0
    assert not decision.outcome.acknowledges


def test_usefulness_deadline_prefers_expires_at():
    """expires_at, when set, replaces due_at + grace."""
    assert usefulness_deadline(reminder(), GRACE) == NOW + GRACE
    expires = NOW + timedelta(hours=2)
    assert usefulness_deadline(reminder(expires_at=expires), GRACE) == expires


def test_a_current_reminder_is_sent():
    """Nothing prevents a send of a live reminder to a subscribed customer."""
    assert reason_not_to_send(reminder(), customer(), channel="email", now=NOW, grace=GRACE) is None


@pytest.mark.parametrize(
    ("rem", "cust", "channel", "outcome"),
    [
        (reminder(state=ReminderState.CANCELLED.value), customer(), "email", Outcome.CANCELLED),
        (reminder(channels=("webhook",)), customer(), "email", Outcome.CANCELLED),
        (
            reminder(),
            customer(opted_out_channels=frozenset({"email"})),
            "email",
            Outcome.SUPPRESSED,
        ),
        (reminder(), customer(unsubscribed_at=NOW), "email", Outcome.SUPPRESSED),
        (
            reminder(state=ReminderState.CANCELLED.value),
            customer(unsubscribed_at=NOW),
            "email",
            Outcome.CANCELLED,
        ),
    ],
)
def test_reasons_not_to_send(rem, cust, channel, outcome):
    """Cancelled (or channel removed) and unsubscribed/opted-out reminders are not sent."""
    assert reason_not_to_send(rem, cust, channel=channel, now=NOW, grace=GRACE) == outcome


def test_opt_out_of_another_channel_does_not_suppress():
    """Opting out of webhooks does not stop email."""
    cust = customer(opted_out_channels=frozenset({"webhook"}))
    assert reason_not_to_send(reminder(), cust, channel="email", now=NOW, grace=GRACE) is None


def test_grace_boundary():
    """Exactly at due_at + grace still sends; one microsecond later it is expired."""
    deadline = NOW + GRACE
    assert (
        reason_not_to_send(reminder(), customer(), channel="email", now=deadline, grace=GRACE)
        is None
    )
    later = deadline + timedelta(microseconds=1)
    assert (
        reason_not_to_send(reminder(), customer(), channel="email", now=later, grace=GRACE)
        == Outcome.EXPIRED
    )


def test_expires_at_boundary():
    """Past expires_at the send is expired, even well inside the grace period."""
    rem = reminder(expires_at=NOW + timedelta(minutes=30))
    at = NOW + timedelta(minutes=30)
    assert reason_not_to_send(rem, customer(), channel="email", now=at, grace=GRACE) is None
    after = at + timedelta(seconds=1)
    assert (
        reason_not_to_send(rem, customer(), channel="email", now=after, grace=GRACE)
        == Outcome.EXPIRED
    )


def plan(error_class: ErrorClass, attempts: int, *, retry_after=None, draw=0.5, max_attempts=3):
    return plan_failure(
        error_class,
        provider_retry_after=retry_after,
        attempts_in_budget=attempts,
        max_attempts=max_attempts,
        policy=BackoffPolicy(base_seconds=10, cap_seconds=600),
        rand=FixedRandom(draw),
        now=NOW,
    )


@pytest.mark.parametrize("attempts", [1, 3, 9])
def test_permanent_failure_is_terminal_at_any_attempt(attempts):
    """A permanent error is terminal_failure, never retried and never dead-lettered."""
    result = plan(ErrorClass.PERMANENT, attempts)
    assert (result.state, result.outcome) == (SendState.TERMINAL_FAILURE, Outcome.TERMINAL)
    assert result.next_attempt_at is None


@pytest.mark.parametrize("error_class", [ErrorClass.TRANSIENT, ErrorClass.RATE_LIMITED])
def test_exhausted_attempts_become_dead(error_class):
    """The attempt that reaches the ceiling and fails makes the row dead."""
    result = plan(error_class, 3, retry_after=5.0)
    assert (result.state, result.outcome) == (SendState.DEAD, Outcome.DEAD_LETTERED)
    assert result.next_attempt_at is None


def test_transient_failure_retries_with_jittered_backoff():
    """Attempt 2 of 3 failed transiently: pending again, due after half the 20 s ceiling."""
    result = plan(ErrorClass.TRANSIENT, 2, draw=0.5)
    assert (result.state, result.outcome) == (SendState.PENDING, Outcome.RETRY)
    assert result.next_attempt_at == NOW + timedelta(seconds=10)
    assert result.retry_after == 10.0


def test_fractional_delay_rounds_retry_after_up():
    """The queue is never told to come back before next_attempt_at."""
    result = plan(ErrorClass.TRANSIENT, 1, draw=0.123)
    assert result.next_attempt_at == NOW + timedelta(seconds=1.23)
    assert result.retry_after == 2.0


def test_rate_limited_failure_waits_for_the_provider():
    """A 429 with Retry-After 120 is retried no sooner than 120 s."""
    result = plan(ErrorClass.RATE_LIMITED, 1, retry_after=120.0)
    assert result.state == SendState.PENDING
    assert result.next_attempt_at == NOW + timedelta(seconds=120)
    assert result.retry_after == 120.0


def test_truncate_error_keeps_short_text_and_cuts_long_text():
    """Stored errors stay bounded; the cut is marked."""
    assert truncate_error("boom") == "boom"
    cut = truncate_error("x" * 1000)
    assert len(cut) == 500
    assert cut.endswith("…")
    assert truncate_error("y" * 500) == "y" * 500


@pytest.mark.parametrize(
    ("outcome", "ack"),
    [
        (Outcome.SENT, True),
        (Outcome.DUPLICATE, True),
        (Outcome.SUPPRESSED, True),
        (Outcome.CANCELLED, True),
        (Outcome.STALE, True),
        (Outcome.EXPIRED, True),
        (Outcome.TERMINAL, True),
        (Outcome.DEAD_LETTERED, True),
        (Outcome.REJECTED, True),
        (Outcome.RETRY, False),
        (Outcome.BUSY, False),
    ],
)
def test_answer_table_ack_column(outcome, ack):
    """Every outcome acknowledges or not exactly as the answer table says."""
    assert outcome.acknowledges is ack


def test_valid_payload_parses():
    """Our own payload becomes a DeliveryPayload."""
    raw = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 3, "extra": 1}
    parsed = parse_delivery_payload(raw, channels=CHANNELS)
    assert (parsed.reminder_id, parsed.channel, parsed.schedule_version) == ("r1", "email", 3)
    assert parsed.to_json() == {
        "v": 1,
        "reminder_id": "r1",
        "channel": "email",
        "schedule_version": 3,
    }


GOOD = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (None, "not a JSON object"),
        ([GOOD], "not a JSON object"),
        ("r1", "not a JSON object"),
        ({**GOOD, "v": 2}, "version"),
        ({k: v for k, v in GOOD.items() if k != "v"}, "version"),
        ({**GOOD, "v": "1"}, "version"),
        ({**GOOD, "reminder_id": ""}, "reminder_id"),
        ({**GOOD, "reminder_id": "r" * 201}, "reminder_id"),
        ({**GOOD, "reminder_id": 17}, "reminder_id"),
        ({**GOOD, "reminder_id": "r\x001"}, "reminder_id"),
        ({**GOOD, "channel": "sms"}, "channel"),
        ({**GOOD, "channel": None}, "channel"),
        ({**GOOD, "channel": ["email"]}, "channel"),
        ({**GOOD, "schedule_version": 0}, "schedule_version"),
        ({**GOOD, "schedule_version": True}, "schedule_version"),
        ({**GOOD, "schedule_version": "1"}, "schedule_version"),
        ({**GOOD, "schedule_version": 1.5}, "schedule_version"),
    ],
)
def test_malformed_payloads_are_refused_naming_the_problem(raw, fragment):
    """Each kind of bad payload raises MalformedDelivery that names the field."""
    with pytest.raises(MalformedDelivery, match=fragment):
        parse_delivery_payload(raw, channels=CHANNELS)


def test_the_api_and_the_domain_name_the_same_delivery_summaries():
    """The OpenAPI enum of ``delivery`` is the domain's DeliverySummary itself (one named
    schema), no more, no less; the per-channel values are some of its values."""
    from app.api.answers import ChannelDelivery, ReminderRow
    from app.domain.states import DeliverySummary

    schema = ReminderRow.model_json_schema()
    assert {"$ref": "#/$defs/DeliverySummary"} in schema["properties"]["delivery"]["anyOf"]
    assert schema["$defs"]["DeliverySummary"]["enum"] == [s.value for s in DeliverySummary]
    assert {c.value for c in ChannelDelivery} < {summary.value for summary in DeliverySummary}
