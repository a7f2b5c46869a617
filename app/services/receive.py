"""Receive one queue delivery: claim → decide with current state → render → send → finalize.

Every phase that touches the database is its own short transaction; none is open
while a provider is called. The finalize is fenced on (state=sending,
attempt_count) so a worker whose lease was taken over cannot overwrite the row.
The parts and the answer are in ``receive_model``, the finalizes in ``receive_finalize``.
"""

from __future__ import annotations

import logging
from datetime import datetime

from app.domain.errors import (
    LedgerUnavailable,
    MalformedDelivery,
)
from app.domain.ledger import (
    LedgerKey,
    SendRecordView,
    answer_unclaimed,
    truncate_error,
)
from app.domain.messages import (
    Delivery,
    DeliveryPayload,
    parse_delivery_payload,
)
from app.domain.ports import ChannelProvider
from app.domain.states import DeadLetterReason, Outcome
from app.observability.tracing import set_span_attribute, span, tracing_enabled

from .attempt import ClaimedSend, claimant_for
from .failover import receive_with_failover
from .receive_model import (
    Answer,
    DeliveryPolicy,
    Receiver,
    SentKeys,
    answer_for,
    dead_letter,
    duplicate_of_sent,
)

__all__ = [
    "Answer", "DeliveryPolicy", "Receiver", "SentKeys", "answer_not_claimed",
    "database_unavailable", "quarantine", "receive_delivery",
]  # fmt: skip

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
            return await quarantine(
                receiver, delivery, reason=DeadLetterReason.MALFORMED, error=str(error)
            )
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
    chain = receiver.chains.get(payload.channel)
    if chain is not None:  # several providers: failover chooses (``failover``)
        return await receive_with_failover(receiver, delivery, payload, chain, claim_and_send)
    provider = receiver.providers[payload.channel]
    key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
    now = receiver.clock()
    sent_by = receiver.sent.get(key, now)
    if sent_by is not None:  # sent is final: the database would answer the same
        return duplicate_of_sent(key, sent_by)
    return await claim_and_send(receiver, delivery, payload, provider, now=now)


async def claim_and_send(
    receiver: Receiver,
    delivery: Delivery,
    payload: DeliveryPayload,
    provider: ChannelProvider,
    *,
    now: datetime,
    earlier: tuple[str, ...] | None = None,
) -> Answer:
    """Claim the send through ``provider`` and, claimed, do the work; else say why not.
    ``earlier``: failover's providers before this one (the claim keeps the failover rule)."""
    key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
    claim = await receiver.ledger.claim_or_read(
        key, now=now, lease_until=now + receiver.policy.lease, earlier=earlier,
        claimant=claimant_for(provider),
    )  # fmt: skip
    if not claim.claimed:
        if claim.record is None and earlier:  # the failover rule refused
            return Answer(Outcome.BUSY, 1.0, key.reminder_id, key.channel, detail="failover")
        return await answer_not_claimed(receiver, delivery, key, now, claim.record)
    assert claim.record is not None and claim.context is not None, "a claim reads its reminder"
    breaker = receiver.breakers.get(provider.name)
    work = ClaimedSend(receiver, delivery, payload, key, claim.record, provider, breaker=breaker)
    return await receiver.run_claim(work.run(claim.context))


async def answer_not_claimed(
    receiver: Receiver,
    delivery: Delivery,
    key: LedgerKey,
    now: datetime,
    existing: SendRecordView | None,
) -> Answer:
    if existing is None:  # the claim inserts nothing when the reminder does not exist
        return await quarantine(
            receiver,
            delivery,
            reason=DeadLetterReason.UNKNOWN_REMINDER,
            error=f"no reminder {key.reminder_id!r}",
        )
    return answer_for(answer_unclaimed(existing, now), key, existing, claimed=False)


async def quarantine(receiver: Receiver, delivery: Delivery, *, reason: str, error: str) -> Answer:
    """Keep an authentic but unusable message in dead_letters and acknowledge it."""
    entry = dead_letter(delivery, reason=reason, error_class=reason, error=error)
    await receiver.ledger.record_dead_letter(entry, now=receiver.clock())
    return Answer(Outcome.REJECTED, detail=f"{reason}: {truncate_error(error, 200)}")
