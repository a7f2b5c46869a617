"""A settled reminder's delivery summary, from every statement that settles one.

The Core settle (SQLite, and any database), the PostgreSQL gateway's single finalize and its
group finalize, and the audit's repair each write ``reminders.delivery`` by the one rule in
``ledger_rules``: delivered channels against channels that were meant to go out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import audit_repo
from app.db.ledger import CoreLedger, PgLedger, reminder_rows
from app.db.ledger.postgres import _Finalize, _finalize_arrays
from app.db.ledger.postgres_batch_sql import finalize_batch_statement
from app.db.ledger.rows import send_record_view
from app.db.redrive_repo import reopen_reminders
from app.db.tables import customers, reminders, send_records
from app.domain.messages import ReminderView

pytestmark = pytest.mark.anyio
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
NO_END = (None, None, None)  # no attempt outcome to write (these rows have no attempts)

SENT = ("sent", "sent")
DEAD = ("dead", "dead_lettered")
TERMINAL = ("terminal_failure", "terminal")
EXPIRED = ("terminal_failure", "expired")
SUPPRESSED = ("terminal_failure", "suppressed")
CANCELLED = ("terminal_failure", "cancelled")
FAILED_OVER = ("terminal_failure", "failed_over")  # handed to the channel's next provider

# (rows as (channel, provider, (state, outcome)), the summary, the summary by channel)
CASES = {
    "one-sent": ([("email", "a", SENT)], "delivered", {"email": "delivered"}),
    "only-send-dead": ([("email", "a", DEAD)], "undelivered", {"email": "undelivered"}),
    "permanent-failure": ([("email", "a", TERMINAL)], "undelivered", {"email": "undelivered"}),
    "expired": ([("email", "a", EXPIRED)], "undelivered", {"email": "undelivered"}),
    "suppressed": ([("email", "a", SUPPRESSED)], "withheld", {"email": "withheld"}),
    "sent-and-dead": (
        [("email", "a", SENT), ("webhook", "a", DEAD)],
        "partially_delivered",
        {"email": "delivered", "webhook": "undelivered"},
    ),
    "sent-and-opted-out": (
        [("email", "a", SENT), ("webhook", "a", CANCELLED)],
        "delivered",
        {"email": "delivered", "webhook": "withheld"},
    ),
    "dead-and-suppressed": (
        [("email", "a", SUPPRESSED), ("webhook", "a", DEAD)],
        "undelivered",
        {"email": "withheld", "webhook": "undelivered"},
    ),
    "failover-accepted": (
        [("email", "a", FAILED_OVER), ("email", "b", SENT)],
        "delivered",
        {"email": "delivered"},
    ),
    "failover-dead": (
        [("email", "a", FAILED_OVER), ("email", "b", DEAD)],
        "undelivered",
        {"email": "undelivered"},
    ),
}


async def seed(engine: AsyncEngine, rid: str, rows: list, *, final: bool = True) -> ReminderView:
    """Reminder ``rid`` enqueued with ``rows``; the last row left ``sending`` unless final."""
    channels = sorted({channel for channel, _, _ in rows})
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(id=f"c-{rid}", email="u@example.com", time_zone="UTC",
                                     opted_out_channels=[], created_at=NOW, updated_at=NOW)
        )  # fmt: skip
        await conn.execute(
            insert(reminders).values(
                id=rid, customer_id=f"c-{rid}", kind="weekly_digest", due_at=NOW,
                channels=channels, data={}, state="enqueued", schedule_version=1,
                created_at=NOW, updated_at=NOW,
            )
        )  # fmt: skip
        for n, (channel, provider, (state, outcome)) in enumerate(rows):
            last_open = not final and n == len(rows) - 1
            await conn.execute(
                insert(send_records).values(
                    reminder_id=rid, channel=channel, provider=provider,
                    state="sending" if last_open else state,
                    outcome=None if last_open else outcome, attempt_count=1,
                    idempotency_key=f"{rid}:{channel}:{provider}", created_at=NOW, updated_at=NOW,
                )
            )  # fmt: skip
    return ReminderView(
        id=rid, customer_id=f"c-{rid}", kind="weekly_digest", state="enqueued", due_at=NOW,
        expires_at=None, channels=tuple(channels), data={}, schedule_version=1,
    )  # fmt: skip


async def delivery_of(engine: AsyncEngine, rid: str) -> tuple[str, str | None]:
    async with engine.connect() as conn:
        row = (
            await conn.execute(select(reminders.c.state, reminders.c.delivery).where(
                reminders.c.id == rid))
        ).one()  # fmt: skip
    return row.state, row.delivery


async def last_record(engine: AsyncEngine, rid: str):
    async with engine.connect() as conn:
        [record] = [
            r for r in await reminder_rows.list_send_records(conn, rid) if r["state"] == "sending"
        ]
    return record


@pytest.mark.parametrize("case", CASES)
async def test_the_core_settle_writes_the_summary(engine, case):
    """The Core settle (every database) marks the reminder done with its summary, and the
    API's per-channel figures agree."""
    rows, summary, by_channel = CASES[case]
    view = await seed(engine, "r1", rows)
    await CoreLedger(engine).settle_if_final(view, {"state": "sent"}, now=NOW)
    assert await delivery_of(engine, "r1") == ("done", summary)
    async with engine.connect() as conn:
        assert await reminder_rows.delivery_by_channel(conn, "r1") == by_channel


@pytest.mark.parametrize("case", CASES)
async def test_the_audit_repair_writes_the_summary(engine, case):
    """A reminder left open with every channel final is settled by the audit, summary and all."""
    rows, summary, _ = CASES[case]
    await seed(engine, "r1", rows)
    async with engine.begin() as conn:
        assert await audit_repo.settle_final_reminders(conn, now=NOW, limit=10) == 1
    assert await delivery_of(engine, "r1") == ("done", summary)


@pytest.fixture
async def pg_ledger(engine: AsyncEngine, db_backend: str) -> AsyncIterator[PgLedger]:
    if db_backend != "postgresql":
        pytest.skip("the hand-written statements are the PostgreSQL gateway's")
    gateway = PgLedger(engine, size=2, statements_in_flight=1)
    yield gateway
    await gateway.close()


@pytest.mark.parametrize("case", CASES)
async def test_the_postgres_finalize_settles_with_the_summary(engine, pg_ledger, case):
    """The single finalize statement settles the reminder with the summary of its rows, the
    row it finalizes included."""
    rows, summary, _ = CASES[case]
    view = await seed(engine, "r1", rows, final=False)
    record = await last_record(engine, "r1")
    state, outcome = rows[-1][2]
    values = {"state": state, "outcome": outcome}
    await pg_ledger.finalize_send(_view_of(record), view, now=NOW, values=values)
    assert await delivery_of(engine, "r1") == ("done", summary)


async def test_the_group_finalize_settles_each_reminder_with_its_summary(engine, pg_ledger):
    """One group statement finalizes the last row of every case; each reminder gets its own
    summary (run directly, so a failing group statement cannot hide behind the fallback)."""
    items, expected = [], {}
    for n, (rows, summary, _) in enumerate(CASES.values()):
        rid = f"r{n}"
        view = await seed(engine, rid, rows, final=False)
        record = await last_record(engine, rid)
        state, outcome = rows[-1][2]
        items.append(
            _Finalize(record["id"], 1, NOW, rid, len(view.channels), NO_END, (state, outcome))
        )
        expected[rid] = ("done", summary)
    answered = await pg_ledger._fetch(
        finalize_batch_statement(("state", "outcome")), *_finalize_arrays(items)
    )
    assert all(row["settled"] for row in answered) and len(answered) == len(items)
    assert {rid: await delivery_of(engine, rid) for rid in expected} == expected


async def test_a_redrive_reopens_the_reminder_without_its_old_summary(engine):
    """Reopened by a redrive, the reminder has no summary until it settles again."""
    view = await seed(engine, "r1", [("email", "a", DEAD)])
    await CoreLedger(engine).settle_if_final(view, {"state": "dead"}, now=NOW)
    async with engine.begin() as conn:
        await reopen_reminders(conn, ["r1"], now=NOW)
    assert await delivery_of(engine, "r1") == ("enqueued", None)
    async with engine.begin() as conn:
        await conn.execute(update(send_records).values(state="sent", outcome="sent"))
    await CoreLedger(engine).settle_if_final(view, {"state": "sent"}, now=NOW)
    assert await delivery_of(engine, "r1") == ("done", "delivered")


def _view_of(record: dict):
    return send_record_view(record)


async def test_a_channel_handed_to_its_next_provider_has_not_ended(engine):
    """A row handed over (failover) leaves its channel open: no per-channel figure yet."""
    await seed(engine, "r1", [("email", "a", FAILED_OVER)])
    async with engine.connect() as conn:
        assert await reminder_rows.delivery_by_channel(conn, "r1") == {}
