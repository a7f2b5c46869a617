"""`reminders serve` delivers embedded-queue messages to its own receiver in process: the
same receiver, answers and redelivery rules as the HTTP push, without the round trip."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest
from sqlalchemy import select

from app.adapters.queues.embedded.dispatcher import Dispatcher, DispatchLimits
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import PushTarget
from app.container import Container
from app.db import queue_repo
from app.db.ledger.postgres_batch_sql import CLAIM_BATCH
from app.db.queue_pg import queue_statements_for
from app.db.tables import send_records
from app.domain.errors import LedgerUnavailable, TransientProviderError
from app.domain.retry import BackoffPolicy
from app.services.background import deliver_in_process
from tests.support.clock import FakeClock
from tests.support.flow import put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


def in_process_dispatcher(
    container: Container, clock: FakeClock, *, concurrency: int = 4, batch_size: int = 10
) -> Dispatcher:
    """A dispatcher with no HTTP client at all: only the receiver of this process."""
    return Dispatcher(
        container.engine,
        None,
        PushTarget(base_url="http://unused.invalid", secret=b"unused"),
        limits=DispatchLimits(
            concurrency=concurrency, batch_size=batch_size, visibility_timeout_seconds=60,
            push_timeout_seconds=5,
            backoff=BackoffPolicy(2.0, 60.0),
        ),
        clock=clock,
        rand=random.Random(3),
        local=deliver_in_process(lambda: container.receiver),
        statements=queue_statements_for(container.receiver.ledger),  # as serve's
    )  # fmt: skip


async def enqueue_due(client, container, clock, publisher, *ids: str) -> None:
    """Register due reminders, sweep, and move the swept messages into the embedded queue."""
    await put_customer(client, "c1")
    for reminder_id in ids:
        await put_reminder(client, reminder_id, customer_id="c1", due_at=clock.now)
    await sweep(client)
    embedded = EmbeddedQueuePublisher(container.engine, max_retries=2, clock=clock)
    await embedded.publish_batch(publisher.drain())


async def queued(container: Container) -> list[dict]:
    async with container.engine.connect() as conn:
        return await queue_repo.list_messages(conn)


async def test_messages_are_sent_once_and_deleted_without_http(
    client, container, clock, publisher, provider
):
    """Three due reminders: three sends through the receiver, the queue left empty; the
    same messages again (a redelivery) answer duplicate with no provider call."""
    await enqueue_due(client, container, clock, publisher, "r1", "r2", "r3")
    dispatcher = in_process_dispatcher(container, clock)
    report = await dispatcher.run_once()
    assert (report.claimed, report.acknowledged, dict(report.outcomes)) == (3, 3, {"sent": 3})
    assert sorted(call.idempotency_key for call in provider.calls) == [
        "r1:email:scripted", "r2:email:scripted", "r3:email:scripted",
    ]  # fmt: skip
    assert await queued(container) == []


async def test_a_retry_answer_is_redelivered_after_its_retry_after(
    client, container, clock, publisher, provider
):
    """A transient provider failure: the message stays, invisible for the receiver's
    Retry-After, then is delivered again and sent."""
    provider.script.append(TransientProviderError("provider down"))
    await enqueue_due(client, container, clock, publisher, "r1")
    dispatcher = in_process_dispatcher(container, clock)
    report = await dispatcher.run_once()
    assert (report.redelivering, dict(report.outcomes)) == (1, {"retry": 1})
    [row] = await queued(container)
    async with container.engine.connect() as conn:
        retry_at = (await conn.execute(select(send_records.c.next_attempt_at))).scalar_one()
    # The receiver's backoff (Retry-After, whole seconds), not the queue's own 2 s base.
    assert abs((row["visible_at"] - retry_at).total_seconds()) <= 1
    wait = (row["visible_at"] - clock.now).total_seconds()
    assert wait > 2
    clock.advance(seconds=wait - 1)
    assert (await dispatcher.run_once()).claimed == 0
    clock.advance(seconds=1)
    assert dict((await dispatcher.run_once()).outcomes) == {"sent": 1}
    assert len(provider.calls) == 2


async def test_a_receiver_that_raises_counts_as_no_answer(
    client, container, clock, publisher, provider
):
    """The database drops mid-delivery: answered retry (a 503 with Retry-After over HTTP,
    never a 500), the message is delivered again later and sent once."""
    await enqueue_due(client, container, clock, publisher, "r1")
    dispatcher = in_process_dispatcher(container, clock)
    ledger = container.receiver.ledger
    real_claim = ledger.claim_many  # in process, a round's messages are claimed together
    failures = [LedgerUnavailable("connection dropped")]

    async def claim_once_failing(*args, **kwargs):
        if failures:
            raise failures.pop()
        return await real_claim(*args, **kwargs)

    ledger.claim_many = claim_once_failing  # type: ignore[method-assign]
    try:
        report = await dispatcher.run_once()
        assert (report.redelivering, dict(report.outcomes)) == (1, {"retry": 1})
        clock.advance(minutes=2)
        assert dict((await dispatcher.run_once()).outcomes) == {"sent": 1}
    finally:
        del ledger.claim_many
    assert len(provider.calls) == 1


async def test_a_round_larger_than_the_concurrency_is_delivered_in_chunks(
    client, container, clock, publisher, provider
):
    """Ten messages at concurrency 3: the round goes to the receiver in chunks of at most
    three, each taking its slots whole, and all ten are sent (chunks taking slots one by
    one at a time would each hold some and wait for the rest for ever)."""
    ids = [f"k{i}" for i in range(10)]
    await enqueue_due(client, container, clock, publisher, *ids)
    dispatcher = in_process_dispatcher(container, clock, concurrency=3, batch_size=10)
    peak = 0
    deliver = dispatcher._hand_off.deliver

    async def counted(messages):
        nonlocal peak
        peak = max(peak, 3 - dispatcher._semaphore._value)
        assert len(messages) <= 3
        return await deliver(messages)

    dispatcher._hand_off = dataclasses.replace(dispatcher._hand_off, deliver=counted)
    async with asyncio.timeout(10):
        report = await dispatcher.run_once()
    assert (report.claimed, dict(report.outcomes)) == (10, {"sent": 10})
    assert peak == 3 and len(provider.calls) == 10


async def test_a_dispatcher_needs_somewhere_to_deliver(container, clock):
    """Neither an HTTP pusher nor a local delivery: refused when built, not at first push."""
    with pytest.raises(ValueError, match="pusher or a local delivery"):
        Dispatcher(
            container.engine, None, PushTarget(base_url="http://x", secret=b"s"),
            limits=DispatchLimits(), clock=clock, rand=random.Random(1),
        )  # fmt: skip


async def test_a_stop_finishes_deliveries_under_way_and_gives_back_the_rest(
    client, container, clock, publisher, provider
):
    """Stopped while the first of three claimed messages is with the provider: that one is
    sent and deleted; the other two are visible again at once with no attempt counted."""
    await enqueue_due(client, container, clock, publisher, "r1", "r2", "r3")
    provider.gate = asyncio.Event()
    dispatcher = in_process_dispatcher(container, clock, concurrency=1)
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop, poll_interval=60))
    await provider.entered.wait()
    stop.set()
    provider.gate.set()
    report = await running
    assert (report.claimed, report.acknowledged, dict(report.outcomes)) == (3, 1, {"sent": 1})
    left = await queued(container)
    assert [(row["attempts"], row["visible_at"]) for row in left] == [(0, clock.now)] * 2
    assert len(provider.calls) == 1


async def test_in_process_deliveries_share_ledger_statements_on_postgresql(
    client, container, clock, publisher, provider, db_backend
):
    """One batch of 30 messages delivered in process at concurrency 30: the 30 claims are
    one statement, the finalizes share statements (sends side by side, group finalize),
    and every reminder is sent exactly once."""
    if db_backend != "postgresql":
        pytest.skip("group statements are the PostgreSQL gateway's")
    ids = [f"g{i}" for i in range(30)]
    await enqueue_due(client, container, clock, publisher, *ids)
    dispatcher = in_process_dispatcher(container, clock, concurrency=30, batch_size=30)
    ledger = container.receiver.ledger
    queries: list[str] = []
    fetch = ledger._fetch

    async def counted(query, *args):
        queries.append(query)
        return await fetch(query, *args)

    ledger._fetch = counted
    try:
        report = await dispatcher.run_once()
    finally:
        del ledger._fetch
    assert (report.claimed, dict(report.outcomes)) == (30, {"sent": 30})
    assert sorted(call.idempotency_key for call in provider.calls) == sorted(
        f"{i}:email:scripted" for i in ids
    )
    [finalizes] = ledger._finalizes.values()
    assert queries.count(CLAIM_BATCH) == 1 and finalizes.statements < 30


async def test_the_next_batch_is_claimed_while_the_last_one_is_delivered(
    client, container, clock, publisher, provider
):
    """A full batch held at the provider: the loop has already claimed the next batch (its
    deliveries queue for a slot), so no delivery waits for a round's claim and apply; no
    more than two rounds are ever claimed; released, each reminder is sent once."""
    ids = [f"p{i}" for i in range(6)]
    await enqueue_due(client, container, clock, publisher, *ids)
    provider.gate = asyncio.Event()
    dispatcher = in_process_dispatcher(container, clock, concurrency=2, batch_size=2)
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop, poll_interval=60))
    await provider.entered.wait()
    for _ in range(100):  # the loop claims the second round without waiting for the first
        if sum(1 for row in await queued(container) if row["visible_at"] > clock.now) == 4:
            break
        await asyncio.sleep(0.01)
    hidden = [row for row in await queued(container) if row["visible_at"] > clock.now]
    assert len(hidden) == 4 and len(provider.calls) <= 2
    provider.gate.set()
    for _ in range(500):
        if not await queued(container):
            break
        await asyncio.sleep(0.01)
    stop.set()
    report = await running
    assert (report.claimed, dict(report.outcomes)) == (6, {"sent": 6})
    assert sorted(call.idempotency_key for call in provider.calls) == sorted(
        f"{i}:email:scripted" for i in ids
    )
