"""The state machines of reminders and of the send ledger, and the receiver's outcomes."""

from enum import StrEnum


class ReminderState(StrEnum):
    """Where a reminder is in its life."""

    SCHEDULED = "scheduled"  # registered; not yet handed to the queue
    ENQUEUED = "enqueued"  # one message per channel published to the queue
    DONE = "done"  # every channel reached a final ledger state (what it came to: delivery)
    CANCELLED = "cancelled"  # the application withdrew it; nothing more will be sent


class SendState(StrEnum):
    """The state of one ledger row, keyed by (reminder, channel, provider)."""

    PENDING = "pending"  # claimable (once next_attempt_at has passed)
    SENDING = "sending"  # claimed by a worker until lease_until
    SENT = "sent"  # the provider accepted it: never sent again
    TERMINAL_FAILURE = (
        "terminal_failure"  # permanent failure or suppression: no more provider calls
    )
    DEAD = "dead"  # attempts exhausted; a dead_letters row tells operators


FINAL_SEND_STATES = frozenset({SendState.SENT, SendState.TERMINAL_FAILURE, SendState.DEAD})
OPEN_SEND_STATES = frozenset({SendState.PENDING, SendState.SENDING})
# A reminder that may still be delivered, and one that never will be again.
OPEN_REMINDER_STATES = frozenset({ReminderState.SCHEDULED, ReminderState.ENQUEUED})
SETTLED_REMINDER_STATES = frozenset({ReminderState.DONE, ReminderState.CANCELLED})


class DeliverySummary(StrEnum):
    """What a ``done`` reminder's channels came to; set when it settles, None before.

    A channel is delivered when a provider accepted it (a ledger row ``sent``), withheld when
    it ended without a send on purpose (``WITHHELD_OUTCOMES``: the customer opted out or the
    address is suppressed, or the channel was withdrawn), and undelivered otherwise (dead
    letter, permanent failure, or expired past its usefulness window)."""

    DELIVERED = "delivered"  # every channel meant to be sent was accepted by a provider
    PARTIALLY_DELIVERED = "partially_delivered"  # some channels delivered, some undelivered
    UNDELIVERED = "undelivered"  # no channel delivered, at least one failed
    WITHHELD = "withheld"  # nothing sent, on purpose: every channel was suppressed or withdrawn


class DeadLetterReason(StrEnum):
    """Why a dead_letters row was written."""

    ATTEMPTS_EXHAUSTED = "attempts_exhausted"  # the ledger's attempt ceiling was reached
    MALFORMED = "malformed"  # authentic, but the payload is not ours to parse
    UNKNOWN_REMINDER = "unknown_reminder"  # names a reminder this database does not have


class Outcome(StrEnum):
    """What the receiver decided for one delivery; named in every push answer."""

    SENT = "sent"  # the provider accepted the message now
    DUPLICATE = "duplicate"  # already sent earlier: acknowledged, no provider call
    SUPPRESSED = "suppressed"  # the customer opted out of this channel
    CANCELLED = "cancelled"  # the reminder was cancelled
    STALE = "stale"  # the message carries an old schedule_version
    EXPIRED = "expired"  # past the reminder's usefulness window
    TERMINAL = "terminal"  # permanent failure (now or earlier)
    DEAD_LETTERED = "dead_lettered"  # attempts exhausted; recorded in dead_letters
    REJECTED = "rejected"  # authentic but unusable message; quarantined in dead_letters
    RETRY = "retry"  # transient or rate-limited failure: redeliver later
    BUSY = "busy"  # another worker holds the lease, or the retry is not due yet

    @property
    def acknowledges(self) -> bool:
        """True when the queue should delete the message."""
        return self not in (Outcome.RETRY, Outcome.BUSY)


# Final outcomes that are a decision not to send, not a failure to deliver (DeliverySummary).
WITHHELD_OUTCOMES = frozenset({Outcome.SUPPRESSED, Outcome.CANCELLED})


class ErrorClass(StrEnum):
    """How a provider failure is treated."""

    TRANSIENT = "transient"  # timeouts, connection errors, 5xx: retry with backoff
    RATE_LIMITED = "rate_limited"  # 429 / throttling: retry no sooner than Retry-After
    PERMANENT = "permanent"  # invalid address, rejected: terminal, no more calls
