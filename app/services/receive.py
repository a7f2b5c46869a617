"""Receive one queue delivery: claim → decide with current state → render → send → finalize.

Every phase that touches the database is its own short transaction; none is open
while a provider is called. The finalize is fenced on (state=sending,
attempt_count) so a worker whose lease was taken over cannot overwrite the row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.adapters.rendering import Renderer
from app.domain.errors import (
    LeaseLost,
    MalformedDelivery,
    ProviderError,
    TransientProviderError,
    WebhookGone,
)
from app.domain.ledger import (
    DeadLetterEntry,
    Decision,
    LedgerKey,
    SendRecordView,
    answer_unclaimed,
    fit_request_id,
    plan_failure,
    reason_not_to_send,
    truncate_error,
)
from app.domain.messages import (
    CustomerView,
    Delivery,
    DeliveryPayload,
    ReminderView,
    SendResult,
    parse_delivery_payload,
)
from app.domain.ports import ChannelProvider, LedgerGateway
from app.domain.retry import BackoffPolicy, RandomSource
from app.domain.states import Outcome, SendState

from .durable import FinalizeRetry, finalize_durably
from .lease import LeaseKeeper

log = logging.getLogger("reminders.receiver")


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """The knobs of the receiver, from settings."""

    lease: timedelta
    provider_timeout_seconds: float
    max_attempts: int
    backoff: BackoffPolicy
    usefulness_grace: timedelta
    # How long a finalize is retried while the database is unreachable (services/durable.py):
    # longer than a PostgreSQL failover.
    finalize_retry_seconds: float = 30.0


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

    # The channel names payloads may carry: derived from providers once, not per delivery.
    channels: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", frozenset(self.providers))

    @property
    def finalize_retry(self) -> FinalizeRetry:
        """How this receiver retries a finalize while the database is unreachable."""
        return FinalizeRetry(
            self.ledger, self.clock, self.sleep, self.policy.finalize_retry_seconds
        )


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


async def receive_delivery(receiver: Receiver, delivery: Delivery) -> Answer:
    """Decide once for one delivery and return the answer for the queue."""
    try:
        payload = parse_delivery_payload(delivery.payload, channels=receiver.channels)
    except MalformedDelivery as error:
        return await quarantine(receiver, delivery, reason="malformed", error=str(error))
    provider = receiver.providers[payload.channel]
    key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
    now = receiver.clock()
    claim = await receiver.ledger.claim_or_read(
        key, now=now, lease_until=now + receiver.policy.lease
    )
    if not claim.claimed:
        return await _answer_unclaimed(receiver, delivery, key, now, claim.record)
    assert claim.record is not None and claim.context is not None, "a claim reads its reminder"
    return await _process_claim(
        receiver, delivery, payload, key, claim.record, claim.context, provider
    )


async def _answer_unclaimed(
    receiver: Receiver,
    delivery: Delivery,
    key: LedgerKey,
    now: datetime,
    existing: SendRecordView | None,
) -> Answer:
    if existing is None:  # the claim inserts nothing when the reminder does not exist
        return await quarantine(
            receiver, delivery, reason="unknown_reminder", error=f"no reminder {key.reminder_id!r}"
        )
    return _answer(answer_unclaimed(existing, now), key, existing, claimed=False)


async def _process_claim(
    receiver: Receiver,
    delivery: Delivery,
    payload: DeliveryPayload,
    key: LedgerKey,
    record: SendRecordView,
    context: tuple[ReminderView, CustomerView],
    provider: ChannelProvider,
) -> Answer:
    reminder, customer = context
    if payload.schedule_version != reminder.schedule_version:
        # The reminder was rescheduled: the current version's message will come. Give the
        # claim back without spending an attempt.
        await receiver.ledger.release_claim(record, now=receiver.clock())
        return _answer(Decision(Outcome.STALE), key, record, claimed=True)
    reason = reason_not_to_send(
        reminder,
        customer,
        channel=payload.channel,
        now=receiver.clock(),
        grace=receiver.policy.usefulness_grace,
    )
    try:
        if reason is not None:
            return await _finalize_without_send(receiver, key, record, reminder, reason)
        try:
            result = await _render_and_send(receiver, key, record, reminder, customer, provider)
        except ProviderError as error:
            return await _finalize_failure(receiver, delivery, key, record, reminder, error)
        return await _finalize_sent(receiver, key, record, reminder, result)
    except LeaseLost:
        return _lease_lost(receiver, key, record)


async def _render_and_send(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    customer: CustomerView,
    provider: ChannelProvider,
) -> SendResult:
    message = receiver.renderer.render(reminder, customer, key.channel)
    timeout = receiver.policy.provider_timeout_seconds
    try:
        # The provider honours the timeout itself; this outer bound only guards against a
        # provider that does not, so a lease can never expire under a live worker.
        async with asyncio.timeout(timeout + 1):
            return await _lease_keeper(receiver, key, record).run(
                lambda: provider.send(message, idempotency_key=key.idempotency_key, timeout=timeout)
            )
    except ProviderError:
        raise
    except TimeoutError as error:
        raise TransientProviderError("provider timed out", detail_class="timeout") from error
    except Exception as error:  # a provider bug must not lose the message: retry, then DLQ
        log.exception("provider %s raised an unclassified error", provider.name)
        raise TransientProviderError(
            f"unclassified provider error: {type(error).__name__}", detail_class="unclassified"
        ) from error


def _lease_keeper(receiver: Receiver, key: LedgerKey, record: SendRecordView) -> LeaseKeeper:
    lease_until = record.lease_until or receiver.clock() + receiver.policy.lease
    return LeaseKeeper(
        receiver.ledger, receiver.clock, receiver.sleep, receiver.policy.lease, key, record,
        lease_until,
    )  # fmt: skip


async def _finalize_sent(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    result: SendResult,
) -> Answer:
    now = receiver.clock()
    values = {
        "state": SendState.SENT.value,
        "outcome": Outcome.SENT.value,
        "sent_at": now,
        "provider_request_id": fit_request_id(result.provider_request_id),
        "next_attempt_at": None,
    }
    await finalize_durably(
        receiver.finalize_retry, key, record, reminder, values,
        lambda: receiver.ledger.finalize_send(record, reminder, now=now, values=values),
    )  # fmt: skip
    return _answer(Decision(Outcome.SENT), key, record, claimed=True)


async def _finalize_without_send(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    reason: Outcome,
) -> Answer:
    now = receiver.clock()
    values = {
        "state": SendState.TERMINAL_FAILURE.value,
        "outcome": reason.value,
        "last_error_class": reason.value,
        "next_attempt_at": None,
    }
    await finalize_durably(
        receiver.finalize_retry, key, record, reminder, values,
        lambda: receiver.ledger.finalize_send(record, reminder, now=now, values=values),
    )  # fmt: skip
    return _answer(Decision(reason), key, record, claimed=True)


async def _finalize_failure(
    receiver: Receiver,
    delivery: Delivery,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    error: ProviderError,
) -> Answer:
    now = receiver.clock()
    plan = plan_failure(
        error.error_class,
        provider_retry_after=getattr(error, "retry_after", None),
        attempts_in_budget=record.attempts_in_budget,
        max_attempts=receiver.policy.max_attempts,
        policy=receiver.policy.backoff,
        rand=receiver.rand,
        now=now,
    )
    message = truncate_error(str(error))
    exhausted = DeadLetterEntry(
        queue=delivery.queue,
        reason="attempts_exhausted",
        message_id=delivery.message_id,
        payload=delivery.payload,
        send_record_id=record.id,
        reminder_id=key.reminder_id,
        channel=key.channel,
        error_class=error.detail_class,
        error=message,
        attempts=record.attempt_count,
    )
    values = {
        "state": plan.state.value,
        "outcome": None if plan.state == SendState.PENDING else plan.outcome.value,
        "next_attempt_at": plan.next_attempt_at,
        "last_error_class": error.detail_class,
        "last_error": message,
    }
    await finalize_durably(
        receiver.finalize_retry, key, record, reminder, values,
        lambda: receiver.ledger.finalize_failed_send(
            record, reminder, now=now, values=values,
            dead_letter=exhausted if plan.state == SendState.DEAD else None,
            disable_webhook=isinstance(error, WebhookGone),  # 410: stop sending to this endpoint
        ),
    )  # fmt: skip
    return _answer(
        Decision(plan.outcome, plan.retry_after, error.detail_class), key, record, claimed=True
    )


def _lease_lost(receiver: Receiver, key: LedgerKey, record: SendRecordView) -> Answer:
    # Another worker reclaimed the row after our lease expired; its result stands. Ask the
    # queue to come back: the redelivery will find the row final and acknowledge.
    log.warning("lease lost for %s at attempt %d", key.idempotency_key, record.attempt_count)
    retry_after = max(1.0, receiver.policy.lease.total_seconds())
    return _answer(Decision(Outcome.BUSY, retry_after, "lease lost"), key, record, claimed=True)


async def quarantine(receiver: Receiver, delivery: Delivery, *, reason: str, error: str) -> Answer:
    """Keep an authentic but unusable message in dead_letters and acknowledge it."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else None
    raw_id = payload.get("reminder_id") if payload else None
    entry = DeadLetterEntry(
        queue=delivery.queue,
        reason=reason,
        message_id=delivery.message_id,
        payload=payload if payload is not None else {"raw": repr(delivery.payload)[:2000]},
        reminder_id=raw_id[:200] if isinstance(raw_id, str) else None,
        error_class=reason,
        error=truncate_error(error),
    )
    await receiver.ledger.record_dead_letter(entry, now=receiver.clock())
    return Answer(Outcome.REJECTED, detail=f"{reason}: {truncate_error(error, 200)}")


def _answer(decision: Decision, key: LedgerKey, record: SendRecordView, *, claimed: bool) -> Answer:
    return Answer(
        outcome=decision.outcome,
        retry_after=decision.retry_after,
        reminder_id=key.reminder_id,
        channel=key.channel,
        attempt=record.attempt_count,
        detail=decision.detail,
        claimed=claimed,
    )
