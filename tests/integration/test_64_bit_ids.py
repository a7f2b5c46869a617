"""The per-delivery tables take ids past 2**31 after migrating a populated database in place."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import bindparam, text

from app.db.engine import create_engine
from app.db.migrations import alembic_config
from app.db.types import UTCDateTime
from tests.conftest import _create_pg_database, _drop_pg_database, _pg_url

BEYOND_32_BITS = 3_000_000_000
NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)


@pytest.fixture
def fresh_url(db_backend: str, tmp_path: Path) -> Iterator[str]:
    """An empty database of the run's backend, not yet migrated."""
    if db_backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'ids.db'}"
        return
    name = f"rr_ids_{uuid.uuid4().hex[:10]}"
    asyncio.run(_create_pg_database(name))
    try:
        yield _pg_url(name)
    finally:
        asyncio.run(_drop_pg_database(name))


_SEED = (
    "INSERT INTO customers (id, time_zone, opted_out_channels, created_at, updated_at) "
    "VALUES ('c1', 'UTC', '[]', :now, :now)",
    "INSERT INTO reminders (id, customer_id, kind, due_at, channels, data, state, "
    "schedule_version, created_at, updated_at) VALUES "
    "('r1', 'c1', 'renewal', :now, '[\"email\"]', '{}', 'done', 1, :now, :now)",
    "INSERT INTO send_records (reminder_id, channel, provider, state, attempt_count, "
    "attempt_budget_start, idempotency_key, redrive_count, created_at, updated_at) VALUES "
    "('r1', 'email', 'smtp', 'dead', 5, 0, 'k1', 0, :now, :now)",
    "INSERT INTO dead_letters (send_record_id, queue, reason, attempts, created_at) "
    "SELECT id, 'q', 'exhausted', 5, :now FROM send_records",
)


def _sql(statement: str):
    bound = text(statement)
    return bound.bindparams(bindparam("now", type_=UTCDateTime())) if ":now" in statement else bound


async def _seed(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            for statement in _SEED:
                await conn.execute(_sql(statement), {"now": NOW})
    finally:
        await engine.dispose()


async def _jump_ids_and_insert(url: str) -> list[tuple[int, int | None]]:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                for table in ("send_records", "dead_letters", "queue_messages"):
                    await conn.execute(
                        text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), :v)"),
                        {"v": BEYOND_32_BITS},
                    )
            else:  # SQLite's rowid continues after the largest id present
                await conn.execute(
                    _sql(
                        "INSERT INTO send_records (id, reminder_id, channel, provider, state, "
                        "attempt_count, attempt_budget_start, idempotency_key, redrive_count, "
                        "created_at, updated_at) VALUES (:v, 'r1', 'sms', 'x', 'sent', 1, 0, "
                        "'k0', 0, :now, :now)"
                    ),
                    {"v": BEYOND_32_BITS, "now": NOW},
                )
            await conn.execute(_sql(_SEED[2].replace("'email'", "'webhook'")), {"now": NOW})
            await conn.execute(
                _sql(
                    "INSERT INTO dead_letters (send_record_id, queue, reason, attempts, "
                    "created_at) SELECT max(id), 'q', 'exhausted', 5, :now FROM send_records"
                ),
                {"now": NOW},
            )
            rows = await conn.execute(
                text("SELECT id, send_record_id FROM dead_letters ORDER BY id")
            )
            return [(row[0], row[1]) for row in rows]
    finally:
        await engine.dispose()


def test_populated_database_migrates_in_place_to_64_bit_ids(fresh_url):
    """Rows written before the migration survive it, and new rows get ids past 2**31."""
    config = alembic_config(fresh_url)
    command.upgrade(config, "0006")
    asyncio.run(_seed(fresh_url))
    command.upgrade(config, "head")
    command.check(config)
    (old_id, old_ref), (new_id, new_ref) = asyncio.run(_jump_ids_and_insert(fresh_url))
    assert (old_id, old_ref) == (1, 1)
    assert new_ref is not None and new_ref > BEYOND_32_BITS
    assert new_id == 2 or new_id > BEYOND_32_BITS
