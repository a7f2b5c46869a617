"""What the receiver is built from and what it answers: its policy, its parts, its verdict.

Kept apart from the phases (``receive``, ``receive_finalize``) so both build answers and
dead letters the one same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from app.adapters.rendering import Renderer
from app.domain.failover import CircuitBreaker
from app.domain.ledger import DeadLetterEntry, Decision, LedgerKey, SendRecordView, truncate_error
from app.domain.messages import Delivery
from app.domain.ports import ChannelProvider, LedgerGateway, SuppressionList
from app.domain.retry import BackoffPolicy, RandomSource
from app.domain.states import Outcome

from .durable import FinalizeRetry
from .sent_keys import SENT_KEYS_SECONDS, SentKeys, SharedSentKeys, sent_keys

log = logging.getLogger("reminders.receiver")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """The knobs of the receiver, from settings."""

    lease: timedelta
    provider_timeout_seconds: float
    max_attempts: int
    backoff: BackoffPolicy
    usefulness_grace: timedelta
    # How long a key this process sent answers its duplicates from memory (``SentKeys``).
    sent_keys_seconds: float = SENT_KEYS_SECONDS


@dataclass(frozen=True, slots=True)
class Receiver:
    """Everything the receiver needs, built once at startup."""

    # Every database write of a delivery: raw asyncpg on PostgreSQL, SQLAlchemy Core
    # elsewhere (app/db/ledger/).
    ledger: LedgerGateway
    providers: Mapping[str, ChannelProvider]
    renderer: Renderer
    policy: DeliveryPolicy
    clock: Callable[[], datetime]
    rand: RandomSource
    # Waits between finalize retries; tests and the simulation pass their own.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # The lease keeper's wait between renewals (``services/lease``), a timer beside the
    # delivery rather than a wait inside it; tests drive it.
    renewal_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # The addresses that receive no email, consulted before every email send (None: no
    # list, as in unit tests of the receiver alone).
    suppressions: SuppressionList | None = None
    # Channels served by several providers, in order (failover, ``services/failover``), and
    # each of those providers' circuit breaker (in this process's memory). Empty: one
    # provider per channel, the path with no failover work at all.
    chains: Mapping[str, tuple[ChannelProvider, ...]] = field(default_factory=dict)
    breakers: Mapping[str, CircuitBreaker] = field(default_factory=dict)

    # The channel names payloads may carry: derived from providers once, not per delivery.
    channels: frozenset[str] = field(init=False)
    # The keys this receiver sent, whose duplicates it answers from memory (under a serve
    # of several workers, every worker's: ``sent_keys``); a copy of a receiver
    # (``dataclasses.replace``) starts with none of this process's own.
    sent: SentKeys | SharedSentKeys = field(init=False)
    # Claims being worked on (send and finalize), each run to its end whatever happens to
    # the request that started it (``run_claim``).
    running: set[asyncio.Task[Any]] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", frozenset(self.providers))
        object.__setattr__(self, "sent", sent_keys(self.policy.sent_keys_seconds))
        object.__setattr__(self, "running", set())

    async def run_claim(self, work: Coroutine[Any, Any, T]) -> T:
        """Run the work on a claim (send, then finalize) shielded from the caller's
        cancellation: a push timeout, a dropped client or a dispatcher's deadline must not
        cut a finalize after an accepted send (the row would stay ``sending`` and the
        redelivery send again). The caller may stop waiting; the work still ends, bounded
        by the provider timeout and the lease."""
        task = asyncio.ensure_future(work)
        self.running.add(task)
        task.add_done_callback(self._ended)
        return await asyncio.shield(task)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self.running.discard(task)
        # Read here so an error is reported even when its caller stopped waiting.
        if not task.cancelled() and task.exception() is not None:
            log.error("work on a claim failed", exc_info=task.exception())

    async def drain(self) -> None:
        """Wait for the claims still being worked on (at shutdown, before the pools close)."""
        if self.running:
            await asyncio.wait(set(self.running))

    def finalize_retry(self, until: datetime) -> FinalizeRetry:
        """How this receiver retries a finalize while the database is unreachable: until
        the lease it holds ends at ``until`` (services/durable.py)."""
        return FinalizeRetry(self.ledger, self.clock, self.sleep, until)


@dataclass(frozen=True, slots=True)
class Answer:
    """The receiver's verdict on one delivery, as the push route reports it."""

    outcome: Outcome
    retry_after: float | None = None
    reminder_id: str | None = None
    channel: str | None = None
    attempt: int | None = None
    detail: str | None = None
    # True when this delivery took the lease (an attempt); metrics count claims from it.
    claimed: bool = False

    def to_json(self) -> dict[str, Any]:
        """The JSON body of the push answer (None fields left out)."""
        body: dict[str, Any] = {"outcome": self.outcome.value, "ack": self.outcome.acknowledges}
        for name in ("retry_after", "reminder_id", "channel", "attempt", "detail"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return body


def answer_for(
    decision: Decision, key: LedgerKey, record: SendRecordView, *, claimed: bool
) -> Answer:
    """The answer for a decision about one ledger row."""
    return Answer(
        outcome=decision.outcome,
        retry_after=decision.retry_after,
        reminder_id=key.reminder_id,
        channel=key.channel,
        attempt=record.attempt_count,
        detail=decision.detail,
        claimed=claimed,
    )


def duplicate_of_sent(key: LedgerKey, attempt: int) -> Answer:
    """The answer to a delivery whose key was already sent (as ``answer_unclaimed`` gives)."""
    return Answer(
        Outcome.DUPLICATE, reminder_id=key.reminder_id, channel=key.channel, attempt=attempt
    )


def dead_letter(
    delivery: Delivery,
    *,
    reason: str,
    error_class: str,
    error: str,
    key: LedgerKey | None = None,
    record: SendRecordView | None = None,
) -> DeadLetterEntry:
    """The dead_letters row for a delivery: a quarantined message, or (with its ledger key
    and row) a send out of attempts."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else None
    if key is not None:
        reminder_id: str | None = key.reminder_id
    else:  # an unusable message: keep whatever reminder id it names, bounded
        raw_id = payload.get("reminder_id") if payload else None
        reminder_id = raw_id[:200] if isinstance(raw_id, str) else None
    return DeadLetterEntry(
        queue=delivery.queue,
        reason=reason,
        message_id=delivery.message_id,
        payload=payload if payload is not None else {"raw": repr(delivery.payload)[:2000]},
        send_record_id=record.id if record is not None else None,
        reminder_id=reminder_id,
        channel=key.channel if key is not None else None,
        error_class=error_class,
        error=truncate_error(error),
        attempts=record.attempt_count if record is not None else 0,
    )
