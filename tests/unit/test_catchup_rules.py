"""Which sends of an enqueued reminder count as lost: the catch-up rule, without a database."""

from datetime import UTC, datetime, timedelta

from app.domain.catchup import LedgerRow, OverdueReminder, catch_up_key, overdue_channels
from app.domain.states import SendState

NOW = datetime(2026, 8, 10, 12, 0, tzinfo=UTC)
MARGIN = timedelta(minutes=30)
REMINDER = OverdueReminder("r1", NOW - timedelta(hours=2), ("email", "webhook"), 3, None)


def row(channel, state, *, back=None, age=timedelta(hours=1)):
    at = NOW - age
    return LedgerRow(
        channel,
        state,
        lease_until=back if state == SendState.SENDING else None,
        next_attempt_at=back if state == SendState.PENDING else None,
        updated_at=at,
    )


def test_channels_without_any_row_are_lost():
    """No ledger row at all: the message vanished before its first delivery."""
    assert overdue_channels(REMINDER, [], now=NOW, margin=MARGIN) == ["email", "webhook"]


def test_a_final_row_of_any_provider_makes_the_channel_final():
    """After a provider switch the old provider's sent row still counts."""
    rows = [
        row("email", SendState.SENT),
        row("email", SendState.PENDING, back=NOW - timedelta(hours=1)),
    ]
    assert overdue_channels(REMINDER, rows, now=NOW, margin=MARGIN) == ["webhook"]


def test_a_retry_or_lease_is_lost_only_a_margin_after_it_was_due_back():
    """Due back 29 minutes ago: maybe just late. 31 minutes ago: lost."""
    late = [row("email", SendState.PENDING, back=NOW - timedelta(minutes=29))]
    lost = [row("email", SendState.SENDING, back=NOW - timedelta(minutes=31))]
    assert "email" not in overdue_channels(REMINDER, late, now=NOW, margin=MARGIN)
    assert "email" in overdue_channels(REMINDER, lost, now=NOW, margin=MARGIN)


def test_every_republish_gets_a_new_key():
    """Keys differ per republish (a queue may remember the old one) and keep the version."""
    first = catch_up_key(REMINDER, "email", NOW)
    later = catch_up_key(REMINDER, "email", NOW + MARGIN)
    assert first != later and first.startswith("r1:email:v3:catchup:")


def test_a_cancelled_reminder_needs_a_message_only_for_its_open_rows():
    """Cancelled: a channel never claimed owes nothing; an orphaned claim needs settling."""
    cancelled = OverdueReminder("r1", NOW - timedelta(hours=2), ("email", "webhook"), 3, None, True)
    orphaned = row("email", SendState.SENDING, back=NOW - timedelta(hours=1))
    assert overdue_channels(cancelled, [orphaned], now=NOW, margin=MARGIN) == ["email"]
    assert overdue_channels(cancelled, [], now=NOW, margin=MARGIN) == []
