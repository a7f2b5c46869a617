"""Behind a backlog the dispatcher's claims go on from where the last full one ended
(PostgreSQL), so a claim does not read again the index entries of every message already
delivered; a message that lies before the position is still claimed, at the latest when a
claim comes back short or ``RESUME_SECONDS`` have passed."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.embedded.dispatcher import RESUME_SECONDS, Dispatcher, DispatchLimits
from app.adapters.queues.embedded.local import LocalAnswer
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import PushTarget
from app.db.ledger import ledger_for
from app.db.queue_pg import queue_statements_for
from app.db.queue_repo import ClaimedMessage
from app.domain.messages import OutgoingMessage
from app.domain.retry import BackoffPolicy
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio


async def acknowledge_all(messages: Sequence[ClaimedMessage]) -> list[LocalAnswer]:
    return [LocalAnswer(True, "sent") for _ in messages]


@pytest.fixture(params=["engine", "raw"])
async def statements(request, engine: AsyncEngine, db_backend: str) -> AsyncIterator[Any]:
    """Where the claims run: the engine (any database), or on PostgreSQL the ledger's raw
    pool, as ``reminders serve`` runs them (``queue_pg``)."""
    if request.param == "engine":
        yield None
        return
    if db_backend != "postgresql":
        pytest.skip("the raw claims are PostgreSQL's")
    ledger = ledger_for(engine, raw_connections=4)
    yield queue_statements_for(ledger)
    await ledger.close()


def dispatcher(
    engine: AsyncEngine, clock: FakeClock, batch_size: int = 10, statements: Any = None
) -> Dispatcher:
    return Dispatcher(
        engine,
        None,
        PushTarget(base_url="http://unused.invalid", secret=b"unused"),
        limits=DispatchLimits(
            concurrency=batch_size, batch_size=batch_size, visibility_timeout_seconds=60,
            push_timeout_seconds=5, backoff=BackoffPolicy(2.0, 60.0),
        ),
        clock=clock,
        rand=random.Random(5),
        local=acknowledge_all,
        statements=statements,
    )  # fmt: skip


def messages(first: int, count: int) -> list[OutgoingMessage]:
    return [
        OutgoingMessage(
            queue="reminders",
            payload={"v": 1, "reminder_id": f"r{number}"},
            delay_seconds=0.0,
            idempotency_key=f"r{number}:email:v1",
        )
        for number in range(first, first + count)
    ]


def keys(claimed: list[ClaimedMessage]) -> list[str]:
    """The claimed messages' reminders, in the order of their rows (not the claim's)."""
    return [message.payload["reminder_id"] for message in claimed]


async def test_a_message_before_the_position_is_claimed_once_a_claim_comes_back_short(
    engine, clock, db_backend, statements
):
    publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
    await publisher.publish_batch(messages(0, 30))
    claims = dispatcher(engine, clock, statements=statements)
    first = await claims.claim(clock.now)
    # Published by a process whose clock is a minute behind: before the position.
    late = EmbeddedQueuePublisher(
        engine, max_retries=5, clock=lambda: clock.now - timedelta(minutes=1)
    )
    await late.publish_batch(messages(100, 1))

    rounds = [first] + [await claims.claim(clock.now) for _ in range(3)]

    assert keys(rounds[0]) == [f"r{n}" for n in range(10)]
    if db_backend == "postgresql":  # from the position on, then topped up from the start
        assert [keys(claimed) for claimed in rounds[1:]] == [
            [f"r{n}" for n in range(10, 20)],
            [f"r{n}" for n in range(20, 30)],
            ["r100"],
        ]
    else:  # SQLite keeps no position: the late message comes first in the order
        assert set(keys(rounds[1])) == {"r100", *(f"r{n}" for n in range(10, 19))}
    assert sorted(key for claimed in rounds for key in keys(claimed)) == sorted(
        [f"r{n}" for n in range(30)] + ["r100"]
    )


async def test_behind_a_backlog_claims_start_from_the_beginning_every_resume_period(
    engine, clock, db_backend, statements
):
    if db_backend != "postgresql":
        pytest.skip("positions are PostgreSQL's")
    publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
    await publisher.publish_batch(messages(0, 50))
    claims = dispatcher(engine, clock, statements=statements)
    await claims.claim(clock.now)
    late = EmbeddedQueuePublisher(
        engine, max_retries=5, clock=lambda: clock.now - timedelta(minutes=1)
    )
    await late.publish_batch(messages(100, 1))
    assert "r100" not in keys(await claims.claim(clock.now))  # a full claim from the position

    clock.advance(seconds=RESUME_SECONDS.total_seconds())
    claimed = await claims.claim(clock.now)

    assert "r100" in keys(claimed)  # from the start: the late message first
    assert len(claimed) == 10


async def test_after_thousands_delivered_a_claim_reads_only_its_batch(engine, clock, db_backend):
    """PostgreSQL keeps the index entries of deleted messages until a vacuum, and while a
    snapshot older than them is open (a sweep's statement runs for seconds) a scan must
    visit each one's row. 6,000 delivered in claims of 64 meanwhile: the next claim must
    not read them all again."""
    if db_backend != "postgresql":
        pytest.skip("dead index entries are PostgreSQL's")
    publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
    await publisher.publish_batch(messages(0, 6200))
    claims = dispatcher(engine, clock, batch_size=64)
    async with engine.connect() as old_snapshot:
        await old_snapshot.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
        await old_snapshot.execute(text("SELECT count(*) FROM queue_messages"))
        for _ in range(6000 // 64):
            claimed = await claims.claim(clock.now)
            await claims.apply(await claims.push_all(claimed), now=clock.now)
        plan = await _plan_of_next_claim(engine, claims, clock)

    due = plan[0]["Plan"]["Plans"][0]  # the CTE: the claim's walk along the index
    assert due["Actual Rows"] == 64
    # 71 read here from a position; 149 from the start after 3,000, 236 after 6,000.
    assert due["Shared Hit Blocks"] + due.get("Shared Read Blocks", 0) < 120


async def _plan_of_next_claim(
    engine: AsyncEngine, claims: Dispatcher, clock: FakeClock, first: str | None = None
) -> Any:
    executed: list[tuple[str, Any]] = []

    def remember(_conn, _cursor, statement, parameters, _context, _many):
        executed.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", remember)
    try:
        await claims.claim(clock.now)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", remember)
    # The claim, after what its transaction ran before it (the planner's settings).
    *before, (statement, parameters) = executed
    assert "UPDATE queue_messages" in statement
    async with engine.connect() as conn:
        if first is not None:
            await conn.exec_driver_sql(first)
        for earlier, earlier_parameters in before:
            await conn.exec_driver_sql(earlier, earlier_parameters)
        [[plan]] = await conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters
        )
        await conn.rollback()
    return plan


async def test_a_claim_from_a_position_walks_the_index_whatever_the_statistics_say(
    engine, clock, db_backend
):
    """PostgreSQL estimated the position's condition as next to no rows in a new database
    during its first sweep (no statistics yet), priced reading every waiting message
    through a bitmap and sorting them below walking the index, and did so for every claim
    (38 ms each at 100,000). Here the index walk is priced out (``enable_indexscan`` off,
    standing in for those estimates): the claim's transaction must still walk it."""
    if db_backend != "postgresql":
        pytest.skip("positions are PostgreSQL's")
    publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
    await publisher.publish_batch(messages(0, 3000))  # one visible_at, as a sweep's batch
    clock.advance(seconds=2)
    claims = dispatcher(engine, clock, batch_size=64)
    await claims.claim(clock.now)  # from the start: the position is set

    plan = await _plan_of_next_claim(
        engine, claims, clock, first="SET LOCAL enable_indexscan = off"
    )

    due = plan[0]["Plan"]["Plans"][0]
    assert due["Actual Rows"] == 64
    assert not _nodes(due, "Sort") and not _nodes(due, "Bitmap Heap Scan"), due


def _nodes(node: dict, kind: str) -> list[dict]:
    found = [node] if node["Node Type"] == kind else []
    for child in node.get("Plans", []):
        found.extend(_nodes(child, kind))
    return found
