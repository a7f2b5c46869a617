"""The sweep on the embedded queue in its own database: a batch's messages and its mark
commit in one transaction (app/services/sweep.py), with big batches, on both databases."""

from datetime import timedelta

import pytest

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db import queue_repo, reminders_repo, sweep_repo
from app.domain.errors import PublishError
from app.domain.queueing import MAX_DELAY_SECONDS as SEVEN_DAYS
from app.services import customers
from app.services.customers import CustomerChange
from app.services.sweep import SweepLimits, messages_for, sweep
from tests.integration.test_sweep import engine

pytestmark = pytest.mark.anyio
__all__ = ["engine"]  # the fixture: an engine on the emptied test database


@pytest.fixture
def queue(engine, clock):
    return EmbeddedQueuePublisher(engine, clock=clock)


async def add_due_reminders(engine, clock, count, *, due_in=timedelta(0)):
    """``count`` email reminders of one customer, due ``due_in`` from now, in one statement."""
    async with engine.begin() as conn:
        await customers.put_customer(
            conn, "c1", CustomerChange(email="c1@example.com"), now=clock.now
        )
        items = [
            (
                f"r{n:05}",
                {
                    "customer_id": "c1",
                    "kind": "weekly_digest",
                    "due_at": clock.now + due_in,
                    "channels": ["email"],
                },
            )
            for n in range(count)
        ]
        await reminders_repo.insert_reminders(conn, items, now=clock.now)


def run(engine, queue, clock, *, batch_size=5000, budget=60.0, monotonic=None, workers=2):
    extra = {"monotonic": monotonic} if monotonic is not None else {}
    limits = SweepLimits(batch_size=batch_size, time_budget_seconds=budget, workers=workers)
    return sweep(
        engine, queue, queue_for=lambda channel: f"q-{channel}", clock=clock, limits=limits, **extra
    )


async def stored_messages(engine):
    async with engine.connect() as conn:
        return await queue_repo.list_messages(conn, limit=100_000)


async def states(engine):
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            "SELECT state, sweep_claimed_until IS NULL, count(*) FROM reminders GROUP BY 1, 2"
        )
        return {(state, unclaimed): count for state, unclaimed, count in rows}


async def test_big_batch_publishes_one_message_per_reminder_and_marks_them(engine, queue, clock):
    """5,000 reminders in one batch: 5,000 messages with their keys, every row enqueued with
    the id of its message, no claim left behind; the dispatcher is told once per batch."""
    await add_due_reminders(engine, clock, 5000)
    woken = []
    queue.on_publish(lambda: woken.append(1))
    report = await run(engine, queue, clock, workers=1)
    assert (report.enqueued, report.messages, report.remaining) == (5000, 5000, 0)
    messages = await stored_messages(engine)
    assert sorted(m["idempotency_key"] for m in messages) == [
        f"r{n:05}:email:v1" for n in range(5000)
    ]
    assert {m["payload"]["reminder_id"] for m in messages} == {f"r{n:05}" for n in range(5000)}
    assert await states(engine) == {("enqueued", True): 5000}
    async with engine.connect() as conn:
        row = await reminders_repo.get_reminder(conn, "r00042")
    [stored] = [m for m in messages if m["payload"]["reminder_id"] == "r00042"]
    assert row["enqueued_message_ids"] == [stored["message_id"]]
    assert woken == [1]


@pytest.mark.parametrize("step", ["move_due_reminders", "mark_moved_sqlite"])
async def test_crash_before_the_commit_leaves_nothing_and_republishes_once(
    engine, queue, clock, monkeypatch, db_backend, step
):
    """The process dies after the messages were inserted, before the commit (after the one
    statement on PostgreSQL; on SQLite also between its message and mark statements): the
    transaction takes the messages with it, the rows stay scheduled with no claim, and the
    next sweep publishes each reminder exactly once."""
    if step == "mark_moved_sqlite" and db_backend != "sqlite":
        pytest.skip("PostgreSQL moves a batch in one statement")
    await add_due_reminders(engine, clock, 3000)
    original = getattr(sweep_repo, step)

    async def die(conn, *args, **kwargs):
        # PostgreSQL runs two batches at once: they may share the 3,000 rows, or the second
        # finds them all held by the first.
        if step == "move_due_reminders" and await original(conn, *args, **kwargs) == (0, 0):
            return 0, 0
        assert await queue_repo.list_messages(conn, limit=5000)  # inserted...
        raise RuntimeError("killed")  # ...and the process dies before the commit

    monkeypatch.setattr(sweep_repo, step, die)
    with pytest.raises(RuntimeError, match="killed"):
        await run(engine, queue, clock)
    assert await stored_messages(engine) == []
    assert await states(engine) == {("scheduled", True): 3000}
    monkeypatch.setattr(sweep_repo, step, original)
    report = await run(engine, queue, clock)
    assert (report.enqueued, report.remaining) == (3000, 0)
    keys = [m["idempotency_key"] for m in await stored_messages(engine)]
    assert len(keys) == len(set(keys)) == 3000


async def test_message_published_before_a_crash_is_not_published_again(engine, queue, clock):
    """A publish that committed (an older sweep, or another path, died before its mark):
    the sweep reuses the key inside the dedup window, so the queue keeps one message and
    the reminder records that message's id."""
    await add_due_reminders(engine, clock, 2)
    due = reminders_repo.DueReminder("r00000", clock.now, ("email",), 1)
    first = messages_for(due, now=clock.now, max_delay=SEVEN_DAYS, queue_for=lambda c: f"q-{c}")
    first_ids = await queue.publish_batch(first)  # ...and the process dies here
    clock.advance(seconds=120)
    assert (await run(engine, queue, clock)).enqueued == 2
    messages = await stored_messages(engine)
    assert sorted(m["idempotency_key"] for m in messages) == ["r00000:email:v1", "r00001:email:v1"]
    async with engine.connect() as conn:
        row = await reminders_repo.get_reminder(conn, "r00000")
    assert row["enqueued_message_ids"] == first_ids


async def test_time_budget_stops_the_sweep_between_big_batches(engine, queue, clock):
    """Each committed batch costs 25 s of the 60 s budget: three batches of 2,000, then the
    sweep stops and reports the rest; the next sweep finishes it. One batch at a time (see
    test_sweep_workers.py for two)."""
    await add_due_reminders(engine, clock, 7000)
    elapsed = [1000.0]
    queue.on_publish(lambda: elapsed.__setitem__(0, elapsed[0] + 25))
    report = await run(
        engine, queue, clock, batch_size=2000, monotonic=lambda: elapsed[0], workers=1
    )
    assert (report.enqueued, report.remaining, report.duration_ms) == (6000, 1000, 75_000)
    assert len(await stored_messages(engine)) == 6000
    second = await run(
        engine, queue, clock, batch_size=2000, monotonic=lambda: elapsed[0], workers=1
    )
    assert (second.enqueued, second.remaining) == (1000, 0)
    assert len(await stored_messages(engine)) == 7000


async def test_refused_batch_stores_nothing_and_is_swept_again(engine, queue, clock):
    """A message the queue refuses (here: a queue name over its limit) stops the sweep with
    the error before anything is stored; the rows stay sweepable at once."""
    await add_due_reminders(engine, clock, 10)
    report = await sweep(
        engine,
        queue,
        queue_for=lambda channel: "q" * 1000,
        clock=clock,
        limits=SweepLimits(),
    )
    assert report.error is not None and "queue name" in report.error
    assert (report.enqueued, report.remaining) == (0, 10)
    assert await stored_messages(engine) == []
    assert await states(engine) == {("scheduled", True): 10}
    assert (await run(engine, queue, clock)).enqueued == 10


async def test_rows_another_sweep_holds_are_skipped(engine, queue, clock, db_backend):
    """PostgreSQL: rows a concurrent sweep's transaction holds are skipped, not waited for,
    and counted as remaining; they are published once that sweep lets go of them."""
    if db_backend != "postgresql":
        pytest.skip("SQLite has one writer: a second sweep waits for the first")
    await add_due_reminders(engine, clock, 20)
    async with engine.connect() as other:
        async with other.begin():
            await other.exec_driver_sql("SELECT id FROM reminders WHERE id < 'r00005' FOR UPDATE")
            report = await run(engine, queue, clock)
        assert (report.enqueued, report.remaining) == (15, 5)
    assert (await run(engine, queue, clock)).enqueued == 5
    assert len(await stored_messages(engine)) == 20


async def test_refusal_is_a_publish_error(engine, queue, clock):
    """The embedded queue refuses with PublishError inside the caller's transaction too."""
    await add_due_reminders(engine, clock, 1)
    due = reminders_repo.DueReminder("r00000", clock.now, ("email",), 1)
    [message] = messages_for(due, now=clock.now, max_delay=SEVEN_DAYS, queue_for=lambda c: "")
    async with engine.begin() as conn:
        with pytest.raises(PublishError):
            await queue.publish_within(conn, [message])
