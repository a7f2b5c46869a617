"""Sweep batches in flight at once (``SweepLimits.workers``): PostgreSQL runs two by default,
each on rows of its own (SKIP LOCKED); SQLite runs one (one writer). And SQLite's batch
statements find rows by key, so a batch costs the same with a million rows behind it."""

import asyncio

import pytest
from sqlalchemy import text

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db import sweep_repo
from tests.integration.test_sweep_embedded import (
    add_due_reminders,
    engine,
    run,
    states,
    stored_messages,
)

pytestmark = pytest.mark.anyio
__all__ = ["engine"]  # the fixture: an engine on the emptied test database


@pytest.fixture
def queue(engine, clock):
    return EmbeddedQueuePublisher(engine, clock=clock)


def watch_batches(monkeypatch, before_move=None):
    """Wrap the batch statement: count the calls and the most batches seen in flight at
    once (``peak``), and await ``before_move(call_number)`` first inside each."""
    seen = {"inside": 0, "peak": 0, "calls": 0}
    original = sweep_repo.move_due_reminders

    async def move(conn, **kwargs):
        seen["calls"] += 1
        seen["inside"] += 1
        seen["peak"] = max(seen["peak"], seen["inside"])
        try:
            if before_move is not None:
                await before_move(seen["calls"])
            return await original(conn, **kwargs)
        finally:
            seen["inside"] -= 1

    monkeypatch.setattr(sweep_repo, "move_due_reminders", move)
    return seen


async def test_postgresql_runs_two_batches_at_once_each_on_its_own_rows(
    engine, queue, clock, db_backend, monkeypatch
):
    """The first batch waits inside until a second one is in flight beside it (one batch
    at a time would time out here); every reminder is then published exactly once."""
    if db_backend != "postgresql":
        pytest.skip("SQLite has one writer: one batch at a time")
    await add_due_reminders(engine, clock, 1050)
    both_inside = asyncio.Event()

    async def meet(_call):
        if seen["inside"] >= 2:
            both_inside.set()
        await asyncio.wait_for(both_inside.wait(), timeout=5)

    seen = watch_batches(monkeypatch, meet)
    report = await run(engine, queue, clock, batch_size=100)
    assert (report.enqueued, report.messages, report.remaining) == (1050, 1050, 0)
    assert seen["peak"] == 2
    keys = [message["idempotency_key"] for message in await stored_messages(engine)]
    assert len(keys) == len(set(keys)) == 1050
    assert await states(engine) == {("enqueued", True): 1050}


async def test_sqlite_runs_one_batch_at_a_time(engine, queue, clock, db_backend, monkeypatch):
    if db_backend != "sqlite":
        pytest.skip("PostgreSQL runs two")
    await add_due_reminders(engine, clock, 450)
    seen = watch_batches(monkeypatch, lambda _call: asyncio.sleep(0.01))
    report = await run(engine, queue, clock, batch_size=100)
    assert (report.enqueued, seen["peak"], seen["calls"]) == (450, 1, 5)


async def test_a_batch_starts_only_with_budget_left(engine, queue, clock, db_backend):
    """Two in flight, each committed batch costing 25 s of the 60 s budget: both start at
    0 s, the next two at 25 and 50 s; at 75 s none starts. The next sweep takes the rest."""
    if db_backend != "postgresql":
        pytest.skip("SQLite runs one batch at a time (test_sweep_embedded)")
    await add_due_reminders(engine, clock, 11000)
    elapsed = [1000.0]
    queue.on_publish(lambda: elapsed.__setitem__(0, elapsed[0] + 25))
    report = await run(engine, queue, clock, batch_size=2000, monotonic=lambda: elapsed[0])
    assert (report.enqueued, report.remaining, report.duration_ms) == (8000, 3000, 100_000)
    second = await run(engine, queue, clock, batch_size=2000, monotonic=lambda: elapsed[0])
    assert (second.enqueued, second.remaining) == (3000, 0)
    assert len(await stored_messages(engine)) == 11000


async def test_a_failed_batch_cancels_the_other_and_reaches_the_caller_as_it_is(
    engine, queue, clock, db_backend, monkeypatch
):
    """The second batch fails (the database went away) while the first is in flight: the
    first is cancelled and rolls back, the error is the caller's as raised, and every row
    is still scheduled with no message; the next sweep publishes each once."""
    if db_backend != "postgresql":
        pytest.skip("SQLite runs one batch at a time")
    await add_due_reminders(engine, clock, 300)
    cancelled = []

    async def fail_second(call):
        if call == 2:
            raise ConnectionResetError("database gone")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(call)
            raise

    watch_batches(monkeypatch, fail_second)
    with pytest.raises(ConnectionResetError, match="database gone"):
        await run(engine, queue, clock, batch_size=100)
    assert cancelled == [1]
    assert await stored_messages(engine) == []
    assert await states(engine) == {("scheduled", True): 300}
    monkeypatch.undo()
    report = await run(engine, queue, clock, batch_size=100)
    assert (report.enqueued, report.remaining) == (300, 0)


# SQLite's statements of one batch (sweep_repo), in their order.
SQLITE_BATCH = ("_PICK_SQLITE", "_WANT_SQLITE", "_REMEMBER_SQLITE", "_STORE_SQLITE", "_MARK_SQLITE")
# Full scans of the durable tables, as the statements name them (the batch's temporary
# tables may be scanned).
DURABLE_SCANS = {
    ("SCAN", table)
    for table in ("main.reminders", "k", "main.queue_idempotency_keys", "main.queue_messages")
}


async def test_sqlite_batch_statements_never_scan_a_durable_table(engine, db_backend):
    """Each statement finds rows of the reminders, keys and messages tables by index. The
    messages statement had SQLite scan every remembered key once per batch (found then in
    the batch by message id), so a sweep of a million slowed as the keys table grew."""
    if db_backend != "sqlite":
        pytest.skip("PostgreSQL moves a batch in one statement")
    scans = {}
    async with engine.begin() as conn:
        for statement in sweep_repo._SQLITE_PREPARE:
            await conn.exec_driver_sql(statement)
        for name in SQLITE_BATCH:
            statement = getattr(sweep_repo, name)
            names = list(statement._bindparams)
            plan = await conn.execute(
                text("EXPLAIN QUERY PLAN " + statement.text), dict.fromkeys(names)
            )
            scans[name] = [
                detail for *_, detail in plan if tuple(detail.split(" ")[:2]) in DURABLE_SCANS
            ]
    assert scans == {name: [] for name in SQLITE_BATCH}
