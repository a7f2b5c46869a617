"""Receive one queue delivery: claim → decide with current state → render → send → finalize.

Every phase that touches the database is its own short transaction; none is open
while a provider is called. The finalize is fenced on (state=sending,
attempt_count) so a worker whose lease was taken over cannot overwrite the row.
The parts and the answer are in ``receive_model``, the finalizes in ``receive_finalize``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

from app.domain.errors import (
    LeaseLost,
    LedgerUnavailable,
    MalformedDelivery,
    ProviderError,
    TransientProviderError,
)
from app.domain.ledger import (
    Decision,
    LedgerKey,
    SendRecordView,
    answer_unclaimed,
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
from app.domain.ports import ChannelProvider
from app.domain.states import Outcome
from app.domain.suppression import ADDRESS_SUPPRESSED
from app.observability.tracing import set_span_attribute, span, tracing_enabled

from .lease import LeaseKeeper
from .receive_finalize import finalize_failure, finalize_sent, finalize_without_send, lease_lost
from .receive_model import (
    Answer,
    DeliveryPolicy,
    Receiver,
    SentKeys,
    answer_for,
    dead_letter,
    duplicate_of_sent,
)
from .suppress import address_suppressed, suppress_refused_recipient

__all__ = ["Answer", "DeliveryPolicy", "Receiver", "SentKeys", "quarantine", "receive_delivery"]

log = logging.getLogger("reminders.receiver")

# Retry-After of a delivery answered while the database is unreachable: a restart takes
# about a second, a failover tens of seconds; the queue's own backoff spaces it further.
DATABASE_RETRY_AFTER_SECONDS = 5.0


async def receive_delivery(receiver: Receiver, delivery: Delivery) -> Answer:
    """Decide once for one delivery and return the answer for the queue."""
    try:
        try:
            payload = parse_delivery_payload(delivery.payload, channels=receiver.channels)
        except MalformedDelivery as error:
            return await quarantine(receiver, delivery, reason="malformed", error=str(error))
        if tracing_enabled():
            return await _receive_traced(receiver, delivery, payload)
        return await _receive(receiver, delivery, payload)
    except LedgerUnavailable as error:
        return database_unavailable(delivery, error)


def database_unavailable(delivery: Delivery, error: LedgerUnavailable) -> Answer:
    """The answer while the database cannot be reached: retry soon (503), never a 500."""
    log.warning("delivery %s: %s", delivery.message_id, error)
    return Answer(
        Outcome.RETRY, retry_after=DATABASE_RETRY_AFTER_SECONDS, detail="database_unavailable"
    )


async def _receive_traced(
    receiver: Receiver, delivery: Delivery, payload: DeliveryPayload
) -> Answer:
    # The reminder's trace, begun when the sweep enqueued it, continues here.
    attributes = {
        "reminder.id": payload.reminder_id, "reminder.channel": payload.channel,
        "messaging.destination.name": delivery.queue, "messaging.message.id": delivery.message_id,
    }  # fmt: skip
    with span("reminders.deliver", traceparent=payload.traceparent, attributes=attributes):
        answer = await _receive(receiver, delivery, payload)
        set_span_attribute("reminders.outcome", answer.outcome.value)
        return answer


async def _receive(receiver: Receiver, delivery: Delivery, payload: DeliveryPayload) -> Answer:
    provider = receiver.providers[payload.channel]
    key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
    now = receiver.clock()
    sent_by = receiver.sent.get(key, now)
    if sent_by is not None:  # sent is final: the database would answer the same
        return duplicate_of_sent(key, sent_by)
    claim = await receiver.ledger.claim_or_read(
        key, now=now, lease_until=now + receiver.policy.lease
    )
    if not claim.claimed:
        return await _answer_unclaimed(receiver, delivery, key, now, claim.record)
    assert claim.record is not None and claim.context is not None, "a claim reads its reminder"
    return await receiver.run_claim(
        _process_claim(receiver, delivery, payload, key, claim.record, claim.context, provider)
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
    return answer_for(answer_unclaimed(existing, now), key, existing, claimed=False)


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
        return answer_for(Decision(Outcome.STALE), key, record, claimed=True)
    reason = reason_not_to_send(
        reminder,
        customer,
        channel=payload.channel,
        now=receiver.clock(),
        grace=receiver.policy.usefulness_grace,
    )
    try:
        if reason is not None:
            return await finalize_without_send(receiver, key, record, reminder, reason)
        if await address_suppressed(receiver, payload.channel, customer):
            return await finalize_without_send(
                receiver, key, record, reminder, Outcome.SUPPRESSED, ADDRESS_SUPPRESSED
            )
        keeper = _lease_keeper(receiver, key, record)
        try:
            result = await _render_and_send(receiver, key, reminder, customer, provider, keeper)
        except ProviderError as error:
            record = keeper.renewed_record
            answer = await finalize_failure(receiver, delivery, key, record, reminder, error)
            await suppress_refused_recipient(receiver, customer, error)
            return answer
        return await finalize_sent(receiver, key, keeper.renewed_record, reminder, result)
    except LeaseLost:
        return lease_lost(receiver, key, record)


async def _render_and_send(
    receiver: Receiver,
    key: LedgerKey,
    reminder: ReminderView,
    customer: CustomerView,
    provider: ChannelProvider,
    keeper: LeaseKeeper,
) -> SendResult:
    message = receiver.renderer.render(reminder, customer, key.channel)
    timeout = receiver.policy.provider_timeout_seconds
    try:
        # The provider honours the timeout itself; this outer bound only guards against a
        # provider that does not, so a lease can never expire under a live worker.
        async with asyncio.timeout(timeout + 1):
            return await keeper.run(
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


async def quarantine(receiver: Receiver, delivery: Delivery, *, reason: str, error: str) -> Answer:
    """Keep an authentic but unusable message in dead_letters and acknowledge it."""
    entry = dead_letter(delivery, reason=reason, error_class=reason, error=error)
    await receiver.ledger.record_dead_letter(entry, now=receiver.clock())
    return Answer(Outcome.REJECTED, detail=f"{reason}: {truncate_error(error, 200)}")
