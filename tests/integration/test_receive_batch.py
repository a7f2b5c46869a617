"""The receiver taking a round's deliveries together (``services/receive_batch``), as the
embedded dispatcher hands them over in process: one claim for the batch, the same answers
as one delivery at a time, on both databases."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from sqlalchemy import select

from app.adapters.queues.memory.publisher import PublishedMessage
from app.db.tables import dead_letters, send_records
from app.domain.errors import LedgerUnavailable
from app.domain.messages import Delivery
from app.domain.states import Outcome
from app.services.receive import receive_delivery
from app.services.receive_batch import receive_batch
from tests.support.flow import API, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


def delivery(message: PublishedMessage, attempt: int = 1) -> Delivery:
    return Delivery(message.queue, message.message_id, message.payload, attempt)


async def due(client, clock, publisher, *ids: str) -> list[PublishedMessage]:
    """Register due reminders and sweep them: their messages, in the order of ``ids``."""
    await put_customer(client, "c1")
    for reminder_id in ids:
        await put_reminder(client, reminder_id, customer_id="c1", due_at=clock.now)
    await sweep(client)
    by_reminder = {m.payload["reminder_id"]: m for m in publisher.drain()}
    return [by_reminder[reminder_id] for reminder_id in ids]


class CountingLedger:
    """Counts the ledger's claim calls, passing them through to the real gateway."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self.many: list[int] = []
        self.single = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)

    async def claim_many(self, requests):
        self.many.append(len(requests))
        return await self.ledger.claim_many(requests)

    async def claim_or_read(self, *args, **kwargs):
        self.single += 1
        return await self.ledger.claim_or_read(*args, **kwargs)


async def test_a_batch_is_claimed_together_and_each_reminder_sent_once(
    client, container, clock, publisher, provider
):
    """Five due reminders in one batch: one claim call for all five, five sends, five sent
    rows; the same five again answer duplicate with no claim and no provider call."""
    messages = await due(client, clock, publisher, *(f"b{i}" for i in range(5)))
    counting = CountingLedger(container.receiver.ledger)
    receiver = dataclasses.replace(container.receiver, ledger=counting)
    answers = await receive_batch(receiver, [delivery(m) for m in messages])
    assert [a.outcome for a in answers] == [Outcome.SENT] * 5
    assert [a.reminder_id for a in answers] == [f"b{i}" for i in range(5)]
    assert (counting.many, counting.single) == ([5], 0)
    again = await receive_batch(receiver, [delivery(m, 2) for m in messages])
    assert [a.outcome for a in again] == [Outcome.DUPLICATE] * 5
    assert (counting.many, counting.single, len(provider.calls)) == ([5], 0, 5)
    async with container.engine.connect() as conn:
        states = (await conn.execute(select(send_records.c.state))).scalars().all()
    assert sorted(states) == ["sent"] * 5


async def test_answers_match_one_delivery_at_a_time_for_every_kind_of_message(
    client, container, clock, publisher, provider
):
    """In one batch, in this order: a send, a cancelled reminder, a malformed payload, a
    second message for the first reminder, an unknown reminder. Each gets the answer it
    gets alone, in its own place; one provider call in all; the two unusable messages are
    quarantined."""
    first, cancelled = await due(client, clock, publisher, "ok", "gone")
    response = await client.delete("/v1/reminders/gone", headers=API)
    assert response.status_code in (200, 204)
    unknown = dataclasses.replace(
        first, message_id="m-unknown", payload={**first.payload, "reminder_id": "nope"}
    )
    malformed = dataclasses.replace(first, message_id="m-bad", payload={"v": 99})
    copy = dataclasses.replace(first, message_id="m-copy")
    batch = [delivery(first), delivery(cancelled), delivery(malformed), delivery(copy),
             delivery(unknown)]  # fmt: skip
    answers = await receive_batch(container.receiver, batch)
    outcomes = [a.outcome for a in answers]
    # The copy runs beside the batch: whichever claims first sends; the other finds the
    # claim held (busy) or the send done (duplicate).
    first_and_copy = sorted([outcomes[0], outcomes[3]], key=lambda o: o != Outcome.SENT)
    assert first_and_copy[0] == Outcome.SENT
    assert first_and_copy[1] in (Outcome.BUSY, Outcome.DUPLICATE)
    assert outcomes[1] == Outcome.CANCELLED
    assert outcomes[2] == Outcome.REJECTED and answers[2].detail.startswith("malformed")
    assert outcomes[4] == Outcome.REJECTED and "unknown" in answers[4].detail
    assert [call.idempotency_key for call in provider.calls] == ["ok:email:scripted"]
    async with container.engine.connect() as conn:
        reasons = (await conn.execute(select(dead_letters.c.reason))).scalars().all()
    assert sorted(reasons) == ["malformed", "unknown_reminder"]
    # Delivered again, alone, either answers duplicate.
    for message in (first, copy):
        answer = await receive_delivery(container.receiver, delivery(message, 2))
        assert answer.outcome == Outcome.DUPLICATE


async def test_an_unreachable_database_answers_every_message_retry(
    client, container, clock, publisher, provider
):
    """The claim cannot reach the database: every message of the batch is answered retry
    (database_unavailable), none is sent; the next batch sends each once."""
    messages = await due(client, clock, publisher, "u1", "u2", "u3")
    real = container.receiver.ledger

    class Down(CountingLedger):
        async def claim_many(self, requests):
            raise LedgerUnavailable("connection refused")

    receiver = dataclasses.replace(container.receiver, ledger=Down(real))
    answers = await receive_batch(receiver, [delivery(m) for m in messages])
    assert [(a.outcome, a.detail) for a in answers] == [(Outcome.RETRY, "database_unavailable")] * 3
    assert provider.calls == []
    answers = await receive_batch(container.receiver, [delivery(m, 2) for m in messages])
    assert [a.outcome for a in answers] == [Outcome.SENT] * 3
    assert len(provider.calls) == 3


async def test_a_claim_refused_for_one_message_fails_that_message_alone(
    client, container, clock, publisher, provider
):
    """The ledger answers one request of the batch with an error of its own: that message
    gets the error (delivered again, as a 500 would be), the others are sent."""
    messages = await due(client, clock, publisher, "e1", "e2")
    real = container.receiver.ledger

    class OneRefused(CountingLedger):
        async def claim_many(self, requests):
            results = await self.ledger.claim_many(requests[1:])
            return [ValueError("refused"), *results]

    receiver = dataclasses.replace(container.receiver, ledger=OneRefused(real))
    answers = await receive_batch(receiver, [delivery(m) for m in messages])
    assert isinstance(answers[0], ValueError)
    assert answers[1].outcome == Outcome.SENT
    assert [call.idempotency_key for call in provider.calls] == ["e2:email:scripted"]


async def test_a_caller_that_stops_waiting_does_not_stop_the_sends(
    client, container, clock, publisher, provider
):
    """The dispatcher's wait ends (its push timeout) while the batch's sends are with the
    provider: the sends finish and are finalized all the same, so a redelivery answers
    duplicate instead of sending again."""
    messages = await due(client, clock, publisher, "s1", "s2")
    provider.gate = asyncio.Event()
    waiting = asyncio.create_task(
        receive_batch(container.receiver, [delivery(m) for m in messages])
    )
    await provider.entered.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    provider.gate.set()
    await container.receiver.drain()
    answers = await receive_batch(container.receiver, [delivery(m, 2) for m in messages])
    assert [a.outcome for a in answers] == [Outcome.DUPLICATE] * 2
    assert len(provider.calls) == 2


async def test_two_batches_racing_for_the_same_messages_send_each_once(
    client, container, clock, publisher, provider
):
    """Two receivers (two dispatchers' rounds) take the same eight messages at once, the
    provider held until both have claimed: each reminder is sent once; the loser of each
    claim answers busy or duplicate."""
    ids = [f"r{i}" for i in range(8)]
    messages = await due(client, clock, publisher, *ids)
    provider.gate = asyncio.Event()
    other = dataclasses.replace(container.receiver)  # its own memory of sent keys
    first = asyncio.create_task(receive_batch(container.receiver, [delivery(m) for m in messages]))
    second = asyncio.create_task(receive_batch(other, [delivery(m) for m in reversed(messages)]))
    await provider.entered.wait()
    await asyncio.sleep(0.2)  # both claims have come back: no more calls start
    provider.gate.set()
    answers = [*await first, *await second]
    assert sorted(call.idempotency_key for call in provider.calls) == sorted(
        f"{i}:email:scripted" for i in ids
    )
    sent = [a for a in answers if a.outcome == Outcome.SENT]
    assert len(sent) == 8
    assert {a.outcome for a in answers} - {Outcome.SENT} <= {Outcome.BUSY, Outcome.DUPLICATE}
