"""Ledger rules: what an unclaimable row means, when not to send, and what a failure becomes.

Plain functions over plain data: the receiver service calls them between the
repository's claim and finalize statements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .messages import CustomerView, ReminderView
from .retry import BackoffPolicy, RandomSource
from .states import ErrorClass, Outcome, ReminderState, SendState

MAX_ERROR_LENGTH = 500
# The detail class of a provider call cut off after its request left (a timeout, a dropped
# connection, a lease that ended mid-call): the provider may have accepted it.
UNKNOWN_OUTCOME = "unknown_outcome"
# Each such attempt may have sent the message, so they are capped (the send is dead-lettered
# at the second) and spaced: a hanging endpoint got 139 POSTs for 20 reminders before.
MAX_UNKNOWN_OUTCOMES = 2
UNKNOWN_OUTCOME_SPACING = timedelta(minutes=5)
# send_records.provider_request_id is VARCHAR(255).
MAX_REQUEST_ID_LENGTH = 255


# A claim's failover context: the providers before the claimed one when its channel has
# several (the claim then keeps the failover rule), or None (one provider: the plain claim).
Earlier = tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class LedgerKey:
    """The identity of one send: a reminder, through one channel, via one provider."""

    reminder_id: str
    channel: str
    provider: str

    @property
    def idempotency_key(self) -> str:
        """The provider idempotency key: stable across attempts, redeliveries and replicas."""
        return f"{self.reminder_id}:{self.channel}:{self.provider}"


# The longest worker name an attempt row keeps (``send_attempts.claimed_by``).
CLAIMANT_WORKER_LENGTH = 200


@dataclass(frozen=True, slots=True)
class Claimant:
    """Who takes a claim, as its attempt row in ``send_attempts`` records it: the worker
    (host and process, cut to ``CLAIMANT_WORKER_LENGTH``) and whether the provider
    deduplicates repeats by the idempotency key."""

    worker: str = ""
    provider_deduplicates: bool = False

    def __post_init__(self) -> None:
        if len(self.worker) > CLAIMANT_WORKER_LENGTH:  # a very long host name
            object.__setattr__(self, "worker", self.worker[:CLAIMANT_WORKER_LENGTH])


# A claim that names no worker (tools and tests); the receiver always names itself.
UNNAMED_CLAIMANT = Claimant()


@dataclass(frozen=True, slots=True)
class AttemptEnd:
    """How one attempt ended, for its row in ``send_attempts``: written once, by the
    finalize that ends the attempt (same statement or transaction) or on its own when no
    finalize ran (a claim given back, a lease lost)."""

    outcome: str
    provider_called: bool
    error_class: str | None = None

    def columns(self) -> tuple[str, bool, str | None]:
        """Outcome, provider called and error class, cut to their columns' widths."""
        error_class = self.error_class[:64] if self.error_class else None
        return self.outcome[:40], self.provider_called, error_class


@dataclass(frozen=True, slots=True)
class SendRecordView:
    """The ledger fields the receiver reasons about."""

    id: int
    state: SendState
    attempt_count: int
    attempt_budget_start: int
    lease_until: datetime | None
    next_attempt_at: datetime | None

    @property
    def attempts_in_budget(self) -> int:
        """Attempts since the last redrive or reschedule reset the budget."""
        return self.attempt_count - self.attempt_budget_start


@dataclass(frozen=True, slots=True)
class ProviderRow:
    """One provider's ledger row of a (reminder, channel), as failover reads it."""

    record: SendRecordView
    # Given to the next provider (outcome ``failed_over``): proven never accepted here.
    handed_over: bool


@dataclass(frozen=True, slots=True)
class Claim:
    """What a claim attempt found, read in the same step as the claim.

    Claimed: the row now held, with the reminder and its customer as they are now. Not
    claimed: the row as it is now (``context`` None), or no row at all when the reminder
    does not exist.
    """

    claimed: bool
    record: SendRecordView | None
    context: tuple[ReminderView, CustomerView] | None = None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """One claim of several taken together (``LedgerGateway.claim_many``, group commit)."""

    key: LedgerKey
    now: datetime
    lease_until: datetime
    claimant: Claimant = UNNAMED_CLAIMANT


@dataclass(frozen=True, slots=True)
class DeadLetterEntry:
    """A message operators must look at: an exhausted send or an unusable delivery."""

    queue: str
    reason: str
    message_id: str | None = None
    payload: Any = None
    send_record_id: int | None = None
    reminder_id: str | None = None
    channel: str | None = None
    error_class: str | None = None
    error: str | None = None
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    """An outcome plus, for nacks, how long the queue should wait."""

    outcome: Outcome
    retry_after: float | None = None
    detail: str | None = None


def lease_margin(lease: timedelta) -> timedelta:
    """How close to its end a lease is too close to start a provider call: a tenth of it,
    at least a second (a paused process, a slow event loop, clocks a little apart)."""
    return max(timedelta(seconds=1), lease / 10)


def seconds_until(moment: datetime | None, now: datetime) -> float:
    """Whole seconds (at least 1) from now until moment; used for Retry-After."""
    if moment is None:
        return 1.0
    return float(max(1, math.ceil((moment - now).total_seconds())))


def answer_unclaimed(record: SendRecordView, now: datetime) -> Decision:
    """Why a claim failed, as the answer to give the queue."""
    if record.state == SendState.SENT:
        return Decision(Outcome.DUPLICATE)
    if record.state == SendState.TERMINAL_FAILURE:
        return Decision(Outcome.TERMINAL)
    if record.state == SendState.DEAD:
        return Decision(Outcome.DEAD_LETTERED)
    if record.state == SendState.SENDING:
        return Decision(Outcome.BUSY, seconds_until(record.lease_until, now), "lease held")
    return Decision(Outcome.BUSY, seconds_until(record.next_attempt_at, now), "retry not due")


def usefulness_deadline(reminder: ReminderView, grace: timedelta) -> datetime:
    """After this instant a send is pointless: ``expires_at``, else ``due_at`` + grace."""
    return reminder.expires_at or reminder.due_at + grace


def reason_not_to_send(
    reminder: ReminderView,
    customer: CustomerView,
    *,
    channel: str,
    now: datetime,
    grace: timedelta,
) -> Outcome | None:
    """The outcome that replaces a send given current state, or None to send."""
    if reminder.state == ReminderState.CANCELLED or channel not in reminder.channels:
        return Outcome.CANCELLED
    if customer.unsubscribed_at is not None or channel in customer.opted_out_channels:
        return Outcome.SUPPRESSED
    if channel == "webhook" and customer.webhook_disabled_at is not None:
        return Outcome.SUPPRESSED
    if now > usefulness_deadline(reminder, grace):
        return Outcome.EXPIRED
    return None


@dataclass(frozen=True, slots=True)
class FailurePlan:
    """What a failed attempt turns the ledger row into."""

    state: SendState
    outcome: Outcome
    next_attempt_at: datetime | None = None
    retry_after: float | None = None


def plan_failure(
    error_class: ErrorClass,
    *,
    provider_retry_after: float | None,
    attempts_in_budget: int,
    max_attempts: int,
    policy: BackoffPolicy,
    rand: RandomSource,
    now: datetime,
    unknown_outcomes: int = 0,
) -> FailurePlan:
    """Classify a failed attempt into terminal, dead or a retry at a jittered time.
    ``unknown_outcomes``: this send's attempts, this one included, whose outcome is unknown."""
    if error_class == ErrorClass.PERMANENT:
        return FailurePlan(SendState.TERMINAL_FAILURE, Outcome.TERMINAL)
    if attempts_in_budget >= max_attempts or unknown_outcomes >= MAX_UNKNOWN_OUTCOMES:
        return FailurePlan(SendState.DEAD, Outcome.DEAD_LETTERED)
    if error_class == ErrorClass.RATE_LIMITED:
        delay = policy.rate_limited_delay(attempts_in_budget, provider_retry_after, rand)
    else:
        delay = policy.delay(attempts_in_budget, rand)
    if unknown_outcomes:
        delay = max(delay, UNKNOWN_OUTCOME_SPACING.total_seconds())
    retry_at = now + timedelta(seconds=delay)
    return FailurePlan(SendState.PENDING, Outcome.RETRY, retry_at, seconds_until(retry_at, now))


def truncate_error(message: str, limit: int = MAX_ERROR_LENGTH) -> str:
    """Keep stored error text short; callers must already have removed secrets."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


def fit_request_id(request_id: str | None) -> str | None:
    """The provider's request id cut to the column: an over-long id must not fail the
    finalize after the provider accepted the message (that would send it again)."""
    return request_id[:MAX_REQUEST_ID_LENGTH] if request_id else request_id
