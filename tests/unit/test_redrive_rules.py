"""The pure redrive rules: what may be published again, and with which key."""

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.redrive import (
    RedriveAction,
    RedriveCandidate,
    ReminderSnapshot,
    SendSnapshot,
    format_age,
    parse_duration,
    plan_redrive,
)
from app.domain.states import SendState

NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
REMINDER = ReminderSnapshot("r1", "done", 2, ("email",))


def _send(state: SendState, **fields: object) -> SendSnapshot:
    values: dict = {
        "id": 7,
        "reminder_id": "r1",
        "channel": "email",
        "state": state,
        "attempt_count": 8,
        "attempt_budget_start": 0,
        "redrive_count": 1,
        "lease_until": None,
        "next_attempt_at": None,
    }
    values.update(fields)
    return SendSnapshot(**values)


def _candidate(send: SendSnapshot | None, reminder=REMINDER, **fields) -> RedriveCandidate:
    values = {"dead_letter_id": 3, "reminder_id": "r1", "channel": "email"}
    values.update(fields)
    return RedriveCandidate(send=send, reminder=reminder, **values)


@pytest.mark.parametrize("state", [SendState.DEAD, SendState.TERMINAL_FAILURE])
def test_dead_and_terminal_sends_publish_with_the_next_redrive_key(state):
    """A dead or terminal send is redriven with key v{current version}:r{redrive_count+1}."""
    plan = plan_redrive(_candidate(_send(state)), now=NOW)
    assert plan.action == RedriveAction.PUBLISH
    assert plan.idempotency_key == "r1:email:v2:r2"
    assert plan.new_redrive_count == 2
    assert plan.payload == {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 2}


def test_sent_is_never_redriven():
    """A record already sent is skipped."""
    plan = plan_redrive(_candidate(_send(SendState.SENT)), now=NOW)
    assert plan.action == RedriveAction.SKIP and "already sent" in plan.reason


def test_live_lease_is_skipped_and_an_expired_one_is_redriven():
    """A send under a live lease is in progress; past its lease it is stuck and redrivable."""
    live = _send(SendState.SENDING, lease_until=NOW + timedelta(seconds=5))
    expired = _send(SendState.SENDING, lease_until=NOW - timedelta(seconds=5))
    assert plan_redrive(_candidate(live), now=NOW).action == RedriveAction.SKIP
    assert plan_redrive(_candidate(expired), now=NOW).action == RedriveAction.PUBLISH


def test_pending_with_a_scheduled_retry_is_skipped():
    """A pending send waiting for its retry is left to the queue."""
    waiting = _send(SendState.PENDING, attempt_budget_start=2, next_attempt_at=NOW)
    assert plan_redrive(_candidate(waiting), now=NOW).action == RedriveAction.SKIP


def test_pending_with_nothing_attempted_since_reset_is_redrivable_unless_already_redriven():
    """A reset whose publish failed can be redriven again; an in-flight redrive cannot."""
    reset = _send(SendState.PENDING, attempt_budget_start=8)
    assert plan_redrive(_candidate(reset), now=NOW).action == RedriveAction.PUBLISH
    stamped = _candidate(reset, redriven_at=NOW)
    assert plan_redrive(stamped, now=NOW).action == RedriveAction.SKIP


@pytest.mark.parametrize(
    ("reminder", "fields", "reason"),
    [
        (None, {}, "does not exist"),
        (ReminderSnapshot("r1", "cancelled", 2, ("email",)), {}, "cancelled"),
        (ReminderSnapshot("r1", "enqueued", 2, ("webhook",)), {}, "no longer uses"),
        (REMINDER, {"reminder_id": None, "channel": None}, "malformed"),
    ],
)
def test_reminder_state_blocks_a_redrive(reminder, fields, reason):
    """Missing, cancelled, re-channelled reminders and malformed messages are skipped."""
    plan = plan_redrive(_candidate(_send(SendState.DEAD), reminder=reminder, **fields), now=NOW)
    assert plan.action == RedriveAction.SKIP and reason in plan.reason


def test_quarantined_message_without_a_record_publishes_a_fresh_message():
    """A quarantined message whose reminder now exists gets a key unique to its dead letter."""
    plan = plan_redrive(_candidate(None), now=NOW)
    assert plan.action == RedriveAction.PUBLISH
    assert plan.idempotency_key == "r1:email:v2:q3"


@pytest.mark.parametrize(
    ("text", "seconds"), [("90", 90), ("90s", 90), ("15m", 900), ("2h", 7200), ("1.5d", 129600)]
)
def test_durations_parse(text, seconds):
    """Operator durations accept s, m, h, d and w units."""
    assert parse_duration(text).total_seconds() == seconds


def test_bad_duration_is_refused_and_ages_format_shortly():
    """Garbage is a ValueError; ages print in the two largest units."""
    with pytest.raises(ValueError):
        parse_duration("soon")
    assert [format_age(s) for s in (5, 300, 3900, 90000, None)] == [
        "5s",
        "5m",
        "1h 5m",
        "1d 1h",
        "-",
    ]
