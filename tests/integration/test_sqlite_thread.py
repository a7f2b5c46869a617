"""A phase of SQLite statements run whole in the connection's thread (``db.sqlite_thread``):
one crossing to that thread, one transaction, SQLAlchemy's own results and errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiosqlite
import pytest
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import sqlite_thread
from app.db.engine import create_engine
from app.db.tables import customers
from app.db.types import UTCDateTime
from tests.integration.test_group_commit_ledger import NOW

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine(clean_database_url: str, db_backend: str) -> AsyncIterator[AsyncEngine]:
    if db_backend != "sqlite":
        pytest.skip("the connection's thread is aiosqlite's")
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
def crossings(monkeypatch) -> list[object]:
    """Every function aiosqlite queues on its connection's thread."""
    calls: list[object] = []
    real = aiosqlite.Connection._execute

    async def counted(self, fn, *args, **kwargs):
        calls.append(fn)
        return await real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return calls


def customer(n: int) -> dict:
    return {"id": f"c{n}", "email": f"u{n}@example.com", "time_zone": "UTC",
            "opted_out_channels": [], "created_at": NOW, "updated_at": NOW}  # fmt: skip


async def insert_three(conn: AsyncConnection) -> list[object]:
    for n in range(3):
        await conn.execute(insert(customers).values(customer(n)))
    rows = await conn.execute(select(customers.c.id, customers.c.created_at).order_by("id"))
    return [tuple(row) for row in rows]


async def customer_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(customers))).scalar_one())


async def test_a_phase_of_several_statements_crosses_to_the_thread_once(engine, crossings):
    async with engine.connect() as conn:  # open the connection first: its setup crosses too
        await conn.execute(text("SELECT 1"))
    crossings.clear()
    rows = await sqlite_thread.run_in_connection_thread(engine, insert_three)
    # the results and their types are SQLAlchemy's (UTCDateTime reads back an aware datetime)
    assert rows == [(f"c{n}", NOW) for n in range(3)]
    assert isinstance(customers.c.created_at.type, UTCDateTime)
    phase_crossings = [fn for fn in crossings if "in_thread" in repr(fn)]
    assert len(phase_crossings) == 1
    assert len(crossings) <= 3  # the phase, and the pool's own checkout and reset
    assert await customer_count(engine) == 3  # committed


async def test_a_phase_that_fails_commits_nothing_and_raises_sqlalchemys_error(engine):
    async def insert_then_repeat(conn: AsyncConnection) -> None:
        await insert_three(conn)
        await conn.execute(insert(customers).values(customer(1)))  # the same key again

    with pytest.raises(IntegrityError):
        await sqlite_thread.run_in_connection_thread(engine, insert_then_repeat)
    assert await customer_count(engine) == 0
    assert await sqlite_thread.run_in_connection_thread(engine, insert_three)  # still usable


async def test_a_phase_that_waits_is_refused_and_commits_nothing(engine):
    async def waits(conn: AsyncConnection) -> None:
        await insert_three(conn)
        await asyncio.sleep(0)  # not a statement: the thread cannot wait for the loop

    with pytest.raises(RuntimeError, match="waited"):
        await sqlite_thread.run_in_connection_thread(engine, waits)
    assert await customer_count(engine) == 0


async def test_without_the_drivers_thread_the_phase_runs_on_the_async_connection(
    engine, crossings, monkeypatch
):
    monkeypatch.setattr(sqlite_thread, "available", lambda driver: False)
    rows = await sqlite_thread.run_in_connection_thread(engine, insert_three)
    assert [row[0] for row in rows] == ["c0", "c1", "c2"]
    assert not [fn for fn in crossings if "in_thread" in repr(fn)]
    assert await customer_count(engine) == 3


async def test_the_installed_aiosqlite_offers_its_thread(engine):
    """The service counts on it for speed; a driver upgrade that drops it must be noticed."""
    async with engine.connect() as conn:
        fairy = await conn.get_raw_connection()
        assert sqlite_thread.available(fairy.driver_connection)
    assert not sqlite_thread.available(object())
