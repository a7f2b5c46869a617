"""Receive a batch of deliveries at once: what the embedded dispatcher hands over in process.

The same decisions as ``receive_delivery`` for each message, with the per-message machinery
taken out where a batch allows it: the claims of every message go to the ledger together
(``LedgerGateway.claim_many``: one statement on PostgreSQL, one transaction on SQLite), and
the claimed messages' work runs in one task shielded from the caller instead of one task
each (``Receiver.run_claim``). Sends and finalizes still run per message (concurrently, so
the ledger's group commit batches the finalizes).

Messages the batch cannot take go through ``receive_delivery`` one by one, beside it: a
malformed payload (quarantined), a channel with several providers (failover claims by its
own rule), any message while tracing is on (each delivery has its span), and a second
message for a key already in the batch (two claims of one row never share a statement).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.domain.errors import LedgerUnavailable, MalformedDelivery
from app.domain.ledger import Claim, ClaimRequest, LedgerKey
from app.domain.messages import (
    CustomerView,
    Delivery,
    DeliveryPayload,
    ReminderView,
    parse_delivery_payload,
)
from app.domain.ports import ChannelProvider
from app.observability.tracing import tracing_enabled

from .attempt import ClaimedSend, claimant_for
from .receive import answer_not_claimed, database_unavailable, receive_delivery
from .receive_model import Answer, Receiver, duplicate_of_sent

SendContext = tuple[ReminderView, CustomerView]
# One delivery's answer, or what its receiving raised (as a 500 would be: delivered again).
Result = Answer | BaseException


@dataclass(frozen=True, slots=True)
class _Batched:
    """A message the batch claims: where its answer goes, and what it claims."""

    position: int
    delivery: Delivery
    payload: DeliveryPayload
    provider: ChannelProvider
    key: LedgerKey


async def receive_batch(receiver: Receiver, deliveries: Sequence[Delivery]) -> list[Result]:
    """Decide once for each delivery; the answers in the order of ``deliveries``."""
    results: list[Result | None] = [None] * len(deliveries)
    now = receiver.clock()
    batched, alone = _split(receiver, deliveries, now, results)
    parts = [_claim_and_work(receiver, batched, now, results)] if batched else []
    parts += [_alone(receiver, deliveries[position], position, results) for position in alone]
    if len(parts) == 1:
        await parts[0]
    elif parts:
        await asyncio.gather(*parts)
    assert all(result is not None for result in results), "every delivery is answered"
    return results  # type: ignore[return-value]


def _split(
    receiver: Receiver, deliveries: Sequence[Delivery], now: datetime, results: list[Result | None]
) -> tuple[list[_Batched], list[int]]:
    """The messages the batch claims, and the positions of those received one by one;
    a duplicate of a key this process sent is answered here (``results``)."""
    batched: list[_Batched] = []
    alone: list[int] = []
    keys: set[LedgerKey] = set()
    tracing = tracing_enabled()
    for position, delivery in enumerate(deliveries):
        try:
            payload = parse_delivery_payload(delivery.payload, channels=receiver.channels)
        except MalformedDelivery:
            alone.append(position)  # quarantined there, with its reason
            continue
        if tracing or payload.channel in receiver.chains:
            alone.append(position)
            continue
        provider = receiver.providers[payload.channel]
        key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
        sent_by = receiver.sent.get(key, now)
        if sent_by is not None:
            results[position] = duplicate_of_sent(key, sent_by)
        elif key in keys:
            alone.append(position)
        else:
            keys.add(key)
            batched.append(_Batched(position, delivery, payload, provider, key))
    return batched, alone


async def _alone(
    receiver: Receiver, delivery: Delivery, position: int, results: list[Result | None]
) -> None:
    try:
        results[position] = await receive_delivery(receiver, delivery)
    except Exception as error:
        results[position] = error


async def _claim_and_work(
    receiver: Receiver, batched: list[_Batched], now: datetime, results: list[Result | None]
) -> None:
    lease_until = now + receiver.policy.lease
    requests = [
        ClaimRequest(item.key, now, lease_until, claimant_for(item.provider)) for item in batched
    ]
    try:
        claims = await receiver.ledger.claim_many(requests)
    except LedgerUnavailable as error:
        for item in batched:
            results[item.position] = database_unavailable(item.delivery, error)
        return
    except Exception as error:  # a bug in the claim: each message is delivered again
        for item in batched:
            results[item.position] = error
        return
    work: list[tuple[_Batched, ClaimedSend, SendContext]] = []
    unclaimed: list[tuple[_Batched, Claim]] = []
    for item, claim in zip(batched, claims, strict=True):
        if isinstance(claim, LedgerUnavailable):
            results[item.position] = database_unavailable(item.delivery, claim)
        elif isinstance(claim, BaseException):
            results[item.position] = claim
        elif claim.claimed:
            assert claim.record is not None and claim.context is not None, "a claim reads"
            send = ClaimedSend(
                receiver, item.delivery, item.payload, item.key, claim.record, item.provider,
                breaker=receiver.breakers.get(item.provider.name),
            )  # fmt: skip
            work.append((item, send, claim.context))
        else:
            unclaimed.append((item, claim))
    await asyncio.gather(
        *(_answer_unclaimed(receiver, item, claim, now, results) for item, claim in unclaimed),
        _run_claimed(receiver, work, results),
    )


async def _answer_unclaimed(
    receiver: Receiver, item: _Batched, claim: Claim, now: datetime, results: list[Result | None]
) -> None:
    try:
        answer = await answer_not_claimed(receiver, item.delivery, item.key, now, claim.record)
    except LedgerUnavailable as error:
        answer = database_unavailable(item.delivery, error)
    except Exception as error:
        results[item.position] = error
        return
    results[item.position] = answer


async def _run_claimed(
    receiver: Receiver,
    work: list[tuple[_Batched, ClaimedSend, SendContext]],
    results: list[Result | None],
) -> None:
    """Every claimed message's send and finalize, in one task run to its end whatever
    happens to the caller (``Receiver.run_claim``)."""
    if not work:
        return

    async def every_claim() -> list[Result]:
        runs = [send.run(context) for _, send, context in work]
        return await asyncio.gather(*runs, return_exceptions=True)

    answers = await receiver.run_claim(every_claim())
    for (item, _, _), answer in zip(work, answers, strict=True):
        if isinstance(answer, LedgerUnavailable):
            answer = database_unavailable(item.delivery, answer)
        results[item.position] = answer
