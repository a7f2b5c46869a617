"""The state machines of reminders and of the send ledger, and the receiver's outcomes."""

from enum import StrEnum


class ReminderState(StrEnum):
    """Where a reminder is in its life."""

    SCHEDULED = "scheduled"  # registered; not yet handed to the queue
    ENQUEUED = "enqueued"  # one message per channel published to the queue
    DONE = "done"  # every channel reached a final ledger state
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


class ErrorClass(StrEnum):
    """How a provider failure is treated."""

    TRANSIENT = "transient"  # timeouts, connection errors, 5xx: retry with backoff
    RATE_LIMITED = "rate_limited"  # 429 / throttling: retry no sooner than Retry-After
    PERMANENT = "permanent"  # invalid address, rejected: terminal, no more calls
