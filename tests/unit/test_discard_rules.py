"""Which dead letters an operator may discard: open quarantined ones no redrive publishes."""

from datetime import UTC, datetime

from app.domain.redrive import RedriveCandidate, ReminderSnapshot, discard_blocker

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
REMINDER = ReminderSnapshot("r1", "scheduled", 1, ("email",))


def _quarantined(**changes) -> RedriveCandidate:
    fields = {"dead_letter_id": 7, "reminder_id": "r1", "channel": "email", "send": None}
    return RedriveCandidate(**{**fields, "reminder": None, "quarantined": True, **changes})


def test_a_letter_for_a_missing_reminder_or_a_malformed_one_may_be_discarded():
    """No redrive can publish either: discarding is allowed."""
    assert discard_blocker(_quarantined(), now=NOW) is None
    assert discard_blocker(_quarantined(reminder_id=None, channel=None), now=NOW) is None


def test_a_letter_whose_reminder_exists_now_is_redriven_not_discarded():
    """The reminder appeared after the message: a redrive would publish it."""
    assert "redrive it instead" in discard_blocker(_quarantined(reminder=REMINDER), now=NOW)


def test_an_exhausted_sends_letter_is_never_discarded():
    """It pairs with its dead send record (the audit checks that): redrive it instead."""
    assert "exhausted send" in discard_blocker(_quarantined(quarantined=False), now=NOW)


def test_closed_letters_are_not_discarded_again():
    """A redriven or already discarded letter is not open any more."""
    assert "already redriven" in discard_blocker(_quarantined(redriven_at=NOW), now=NOW)
    assert "already discarded" in discard_blocker(_quarantined(discarded_at=NOW), now=NOW)
