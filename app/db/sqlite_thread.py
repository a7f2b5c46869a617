"""A phase of SQLite statements run in one go inside the connection's own thread.

aiosqlite runs its ``sqlite3`` connection in a thread of its own, and SQLAlchemy's adapter
crosses to that thread and back four times for each statement (cursor, execute, fetch,
close). For SQLite those hand-offs, not the statements, were most of a delivery's cost: a
batch of claims held the one connection while it waited on thread switches, and every
other delivery waited for the connection (bench/README.md, 2026-12-03: 289 reminders/s
with the hand-offs, 724/s without).

``run_in_connection_thread`` instead sends the whole phase across once. The phase is the
same ``async def`` code that runs on an ``AsyncConnection`` (the repositories' functions,
written once): inside the thread it gets a ``ThreadConnection``, whose ``execute`` runs
the statement on a synchronous SQLAlchemy connection over the same ``sqlite3`` connection
and returns at once, so the coroutine never suspends and ``drive`` runs it to its end.
Statements, types, results and errors are SQLAlchemy's own, as on the usual path.

This uses two attributes aiosqlite does not document (the connection's ``_execute``, which
queues a function on its thread, and ``_conn``, the ``sqlite3`` connection; SQLAlchemy's
own adapter uses the same queue). ``available`` says whether the driver has them; where it
does not, callers run the phase on the ``AsyncConnection`` as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, create_engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import StaticPool

T = TypeVar("T")

# The synchronous engine over one sqlite3 connection lives in the pooled connection's
# ``info``, which SQLAlchemy keeps exactly as long as that sqlite3 connection.
_SYNC_ENGINE = "reminders.sqlite_thread.engine"


class ThreadConnection:
    """An ``AsyncConnection``'s face (``execute``, ``dialect``) on a synchronous one."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.dialect = connection.dialect

    async def execute(self, statement: Any, parameters: Any = None) -> Any:
        """Run the statement now; the result is SQLAlchemy's, buffered as on the async path."""
        return self._connection.execute(statement, parameters)


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its result, here and now."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coroutine.close()
    raise RuntimeError("a phase run in the SQLite thread waited for something")


def available(driver_connection: Any) -> bool:
    """Whether this driver connection can run a function in its thread."""
    return callable(getattr(driver_connection, "_execute", None)) and hasattr(
        type(driver_connection), "_conn"
    )


async def run_in_connection_thread(
    engine: AsyncEngine, phase: Callable[[AsyncConnection], Awaitable[T]]
) -> T:
    """``phase`` in one transaction, run whole in the SQLite connection's thread (the
    module docstring); on a driver that cannot, on the ``AsyncConnection`` as usual."""
    async with engine.connect() as conn:
        fairy = await conn.get_raw_connection()
        driver: Any = fairy.driver_connection
        if not available(driver):
            async with conn.begin():
                return await phase(conn)
        info = conn.info

        def in_thread() -> T:
            sqlite_connection = driver._conn  # runs in the thread that owns it
            sync_engine = info.get(_SYNC_ENGINE)
            if sync_engine is None:
                sync_engine = info[_SYNC_ENGINE] = _sync_engine(sqlite_connection)
            with sync_engine.begin() as sync:
                view = cast(AsyncConnection, ThreadConnection(sync))
                return drive(cast(Coroutine[Any, Any, T], phase(view)))

        return cast(T, await driver._execute(in_thread))


def _sync_engine(sqlite_connection: Any) -> Engine:
    # StaticPool hands out this one connection and never opens another; it is never
    # disposed, so it never closes the connection either: aiosqlite owns it.
    return create_engine("sqlite://", creator=lambda: sqlite_connection, poolclass=StaticPool)
