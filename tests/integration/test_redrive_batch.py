"""Batch redrive is set-based: a handful of statements per batch, whatever its size.

The batch mixes every kind of candidate a filter can select: exhausted sends, a second
open dead letter of the same send, a send whose reminder was cancelled, and quarantined
messages whose reminder exists now (no send record yet).
"""

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.db.engine import create_engine
from app.db.tables import customers, dead_letters, reminders, send_records
from app.domain.redrive import DeadLetterFilter
from app.services import dead_letters as service

pytestmark = pytest.mark.anyio

EXHAUSTED = 480
QUARANTINED = 10
CANCELLED = 5
REPEATED = 5  # exhausted sends with a second open dead letter
BATCH = EXHAUSTED + QUARANTINED + CANCELLED + REPEATED  # 500 dead letters
# list + three reads to plan, three writes to apply; a little room for the transaction.
MAX_STATEMENTS = 12


@pytest.fixture
async def engine(clean_database_url):
    """An engine on the emptied test database."""
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@contextmanager
def counted_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, _parameters, _context, _executemany) -> None:
        seen.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


def _reminder(reminder_id: str, state: str, now) -> dict:
    return {
        "id": reminder_id,
        "customer_id": "c1",
        "kind": "weekly_digest",
        "due_at": now - timedelta(hours=1),
        "channels": ["email"],
        "data": {},
        "state": state,
        "schedule_version": 1,
        "created_at": now,
        "updated_at": now,
    }


async def seed(engine: AsyncEngine, now) -> None:
    """The mixed batch, written straight into the tables."""
    dead_sends = [f"r{n}" for n in range(EXHAUSTED + CANCELLED)]
    quarantined = [f"q{n}" for n in range(QUARANTINED)]
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers),
            [{"id": "c1", "email": "c1@example.com", "created_at": now, "updated_at": now}],
        )
        await conn.execute(
            insert(reminders),
            [
                _reminder(rid, "cancelled" if n >= EXHAUSTED else "done", now)
                for n, rid in enumerate(dead_sends)
            ]
            + [_reminder(rid, "enqueued", now) for rid in quarantined],
        )
        await conn.execute(
            insert(send_records),
            [
                {
                    "reminder_id": rid,
                    "channel": "email",
                    "provider": "outbox",
                    "state": "dead",
                    "attempt_count": 3,
                    "attempt_budget_start": 0,
                    "outcome": "dead_lettered",
                    "idempotency_key": f"{rid}:email:outbox",
                    "created_at": now,
                    "updated_at": now,
                }
                for rid in dead_sends
            ],
        )
        sends = (await conn.execute(select(send_records.c.id, send_records.c.reminder_id))).all()
        letter = {
            "queue": "reminders-email",
            "channel": "email",
            "payload": None,
            "created_at": now,
        }
        rows = [
            {
                **letter,
                "send_record_id": send_id,
                "message_id": f"m-{rid}",
                "reminder_id": rid,
                "reason": "attempts_exhausted",
                "attempts": 3,
            }
            for send_id, rid in sends
        ]
        rows += [{**row, "message_id": row["message_id"] + "-again"} for row in rows[:REPEATED]]
        rows += [
            {
                **letter,
                "send_record_id": None,
                "message_id": f"m-{rid}",
                "reminder_id": None,
                "channel": None,
                "attempts": 1,
                "payload": {"v": 1, "reminder_id": rid, "channel": "email", "schedule_version": 1},
                "reason": "unknown_reminder",
            }
            for rid in quarantined
        ]
        await conn.execute(insert(dead_letters), rows)


async def test_redriving_500_dead_letters_takes_a_bounded_number_of_statements(engine, clock):
    """500 dead letters are planned and applied in a few statements, with per-item results."""
    await seed(engine, clock.now)
    publisher = MemoryPublisher(clock=clock)
    ctx = service.RedriveContext(engine, publisher, lambda channel: f"q-{channel}", clock)

    with counted_statements(engine) as statements:
        report = await service.redrive_dead_letters(
            ctx, DeadLetterFilter(), dry_run=False, limit=BATCH
        )

    assert len(report.items) == BATCH
    assert len(statements) <= MAX_STATEMENTS, "\n".join(statements)
    reasons = Counter(_reason_kind(item.to_json()["reason"]) for item in report.items)
    assert reasons == {
        "reset": EXHAUSTED,
        "no send record yet": QUARANTINED,
        "reminder is cancelled": CANCELLED,
        "same send record": REPEATED,
    }
    assert report.published == EXHAUSTED + QUARANTINED
    assert len(publisher.drain()) == EXHAUSTED + QUARANTINED
    await assert_stored(engine)


def _reason_kind(reason: str) -> str:
    if reason.startswith("same send record as dead letter"):
        return "same send record"
    return "reset" if "reset to pending" in reason else reason.split(":")[0]


async def assert_stored(engine: AsyncEngine) -> None:
    """Reset sends pending with a fresh budget; their reminders reopened; letters stamped."""
    async with engine.connect() as conn:
        states = Counter(
            (state, count, budget)
            for state, count, budget in await conn.execute(
                select(
                    send_records.c.state,
                    send_records.c.redrive_count,
                    send_records.c.attempt_budget_start,
                )
            )
        )
        reminder_states = Counter(
            state for (state,) in await conn.execute(select(reminders.c.state))
        )
        open_letters = Counter(
            reason
            for (reason,) in await conn.execute(
                select(dead_letters.c.reason).where(dead_letters.c.redriven_at.is_(None))
            )
        )
    assert states == {("pending", 1, 3): EXHAUSTED, ("dead", 0, 0): CANCELLED}
    assert reminder_states == {"enqueued": EXHAUSTED + QUARANTINED, "cancelled": CANCELLED}
    assert open_letters == {"attempts_exhausted": CANCELLED}
