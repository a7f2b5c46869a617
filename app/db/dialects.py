"""Dialect-specific statement builders shared by the repositories."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Column, ColumnElement, String, Table, any_, bindparam
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
