"""Dialect-specific statement builders shared by the repositories."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Column, ColumnElement, String, Table, any_, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection


def insert_for(conn: AsyncConnection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT with ``on_conflict_do_*`` for the connection's dialect (PostgreSQL or SQLite)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def among(conn: AsyncConnection, column: Column[Any], ids: Collection[str]) -> ColumnElement[bool]:
    """``column IN ids``. On PostgreSQL as ``= ANY(array)``: one statement text (prepared and
    cached once) whatever the number of ids, where IN renders a new text per count."""
    if conn.dialect.name == "postgresql":
        return column == any_(bindparam(None, list(ids), type_=postgresql.ARRAY(String)))
    return column.in_(list(ids))


async def lock_by_id(
    conn: AsyncConnection, table: Table, ids: Collection[str]
) -> dict[str, dict[str, Any]]:
    """The rows of ``table`` whose id is among ``ids``, by id, row-locked (PostgreSQL) in id
    order until the transaction ends, so concurrent batches never deadlock on each other."""
    if not ids:
        return {}
    stmt = select(table).where(among(conn, table.c.id, ids)).order_by(table.c.id)
    return {row.id: row._asdict() for row in await conn.execute(stmt.with_for_update())}


async def plan_for_these_arrays(conn: AsyncConnection) -> None:
    """PostgreSQL: plan the rest of this transaction's statements for their actual values.

    A batch's array statements (``unnest``) are prepared and cached per connection; after
    five runs PostgreSQL may keep a generic plan, and one made while a table was nearly
    empty scans it per batch until autoanalyze invalidates the plan. Planning anew costs
    well under a millisecond per statement, nothing beside a batch of thousands of rows."""
    if conn.dialect.name == "postgresql":
        await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
