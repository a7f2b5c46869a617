"""On PostgreSQL a reminder's sweep and settle, and its send record's claim and finalize,
write index entries only where a query reads them (migration 0022): a row version takes
an entry in each index whose predicate it meets, and the changes of ``state`` are not HOT
updates. Before, every version took one in every index of its table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import (
    catchup_repo,
    email_events_repo,
    operations_repo,
    retention_repo,
    sweep_repo,
)
from app.db.ledger import PgLedger, ledger_for
from app.domain.queueing import DEDUP_WINDOW, RETENTION
from app.domain.states import ReminderState
from tests.integration.test_attempt_pages import claim_all, seed, send_all
from tests.support.ledger_gateways import engine

pytestmark = pytest.mark.anyio
__all__ = ["engine"]

NOW = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
# Few enough that every index fits in one leaf page: no split, so nothing is deleted from
# an index before it is counted.
COUNT = 40

# Entries each index holds once COUNT one-off reminders were registered, swept, claimed,
# sent and settled: a version in a state its predicate excludes adds none.
EXPECTED = {
    # scheduled and enqueued versions; not the settled one
    "ix_reminders_state_due_at": 2 * COUNT,
    # the settled version only
    "ix_reminders_state_updated_at": COUNT,
    # one-off reminders belong to no schedule
    "ix_reminders_schedule_id_due_at_id": 0,
    # the claimed (sending) version; not the sent one
    "ix_send_records_state_lease_until": COUNT,
    # the sent version, which has the provider's id; not the claimed one
    "ix_send_records_provider_request_id": COUNT,
    # unchanged, for scale: every version of every reminder
    "ix_reminders_due_at_id": 3 * COUNT,
}

_LEAF_ENTRIES = text(
    """
    SELECT coalesce(sum(s.live_items + s.dead_items - (s.btpo_next <> 0)::int), 0)
    FROM generate_series(1, pg_relation_size(CAST(:index AS regclass))
                             / current_setting('block_size')::int - 1) AS b,
         bt_page_stats(CAST(:index AS text), b) AS s
    WHERE s.type = 'l'
    """
)


async def sweep_all(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        moved, _ = await sweep_repo.move_due_reminders(
            conn, now=NOW, horizon_end=NOW + timedelta(days=7), latest=NOW + timedelta(days=7),
            window_start=NOW - DEDUP_WINDOW, expires_at=NOW + RETENTION, limit=COUNT,
            queues={"email": "default"}, max_retries=5,
        )  # fmt: skip
    assert moved == COUNT


async def deliver_all(engine: AsyncEngine) -> None:
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    try:
        await send_all(ledger, await claim_all(ledger, COUNT))
    finally:
        await ledger.close()


async def index_entries(engine: AsyncEngine) -> dict[str, int]:
    async with engine.begin() as conn:
        await conn.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
        return {
            name: int((await conn.execute(_LEAF_ENTRIES, {"index": name})).scalar_one())
            for name in EXPECTED
        }


async def test_row_versions_take_entries_only_in_the_indexes_that_read_their_state(
    engine, db_backend
):
    """COUNT reminders from registration to settled: the state-limited indexes hold only the
    versions in their states, the schedule and provider-id ones only rows with a value."""
    if db_backend != "postgresql":
        pytest.skip("non-HOT updates writing every index are PostgreSQL's")
    await seed(engine, count=COUNT, state="scheduled")
    await sweep_all(engine)
    await deliver_all(engine)
    async with engine.connect() as conn:
        states = await conn.execute(text("SELECT state, count(*) FROM reminders GROUP BY state"))
        assert dict(states.all()) == {"done": COUNT}
    assert await index_entries(engine) == EXPECTED


async def _statements_of(engine: AsyncEngine, call) -> list[tuple[str, object]]:
    """Each statement ``call(conn)`` sent, with its parameters."""
    executed: list[tuple[str, object]] = []

    def remember(_conn, _cursor, statement, parameters, _context, _many):
        executed.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", remember)
    try:
        async with engine.begin() as conn:
            await call(conn)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", remember)
    return [item for item in executed if item[0].lstrip().upper().startswith(("SELECT", "WITH"))]


async def _plans(engine: AsyncEngine, statements: list[tuple[str, object]]) -> str:
    async with engine.begin() as conn:
        # Empty tables are cheapest read whole: forbid that to see which index a plan takes.
        await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        await conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
        # The plan a prepared statement settles on after five runs: generic, made without
        # the parameters' values, so only literals in its text can prove a predicate.
        await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        plans = []
        for number, (statement, parameters) in enumerate(statements):
            await conn.exec_driver_sql(f"PREPARE reader_{number} AS {statement}")
            values = ", ".join(_quoted(value) for value in parameters)
            execute = f"EXPLAIN EXECUTE reader_{number}" + (f"({values})" if values else "")
            rows = await conn.exec_driver_sql(execute)
            plans.append("\n".join(row[0] for row in rows))
    return "\n\n".join(plans)


def _quoted(value: object) -> str:
    """A parameter as an untyped literal: the prepared statement gives it its type."""
    if value is None:
        return "NULL"
    text_of = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text_of.replace("'", "''") + "'"


_LATER = NOW + timedelta(days=40)
READERS = {
    "sweep": (
        lambda conn: sweep_repo.move_due_reminders(
            conn,
            now=NOW,
            horizon_end=NOW + timedelta(days=7),
            latest=NOW + timedelta(days=7),
            window_start=NOW - DEDUP_WINDOW,
            expires_at=NOW + RETENTION,
            limit=10,
            queues={"email": "default"},
            max_retries=5,
        ),
        "ix_reminders_state_due_at",
    ),
    "catch-up": (
        lambda conn: catchup_repo.claim_overdue_reminders(conn, now=NOW, cutoff=NOW, limit=10),
        "ix_reminders_state_due_at",
    ),
    "sweep lag": (
        lambda conn: operations_repo.oldest_overdue_scheduled(conn, now=NOW),
        "ix_reminders_state_due_at",
    ),
    "retention": (
        lambda conn: retention_repo.lock_purgeable_reminders(
            conn, ReminderState.DONE, before=_LATER, limit=10
        ),
        "ix_reminders_state_updated_at",
    ),
    "stuck sends": (
        lambda conn: operations_repo.stuck_sends(conn, now=NOW),
        "ix_send_records_state_lease_until",
    ),
    "provider event": (
        lambda conn: email_events_repo.find_send(conn, "req-1"),
        "ix_send_records_provider_request_id",
    ),
}


@pytest.mark.parametrize("reader", list(READERS))
async def test_each_reader_of_a_limited_index_can_use_it(engine, db_backend, reader):
    """The queries these indexes serve name their states as literals (or compare the column,
    which proves it is not null), so PostgreSQL can prove their rows lie inside the index's
    predicate, whatever the parameters: each plan reads its index."""
    if db_backend != "postgresql":
        pytest.skip("the predicates that limit by state are PostgreSQL's")
    call, index = READERS[reader]
    plan = await _plans(engine, await _statements_of(engine, call))
    assert index in plan, plan
