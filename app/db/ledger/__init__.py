"""The send ledger: every write of a delivery goes through one ``LedgerGateway``.

- ``repo``: the SQLAlchemy Core statements (any database; the services' other ledger reads
  and writes use them too);
- ``rows``: the one mapping from rows to domain views;
- ``core.CoreLedger``: the gateway on those statements (any database);
- ``sqlite.SqliteLedger``: the same, its claims and finalizes sharing transactions (SQLite);
- ``postgres.PgLedger``: the same gateway whose hot phases run as single raw statements on
  asyncpg's own pool (PostgreSQL); the same contract suite runs both.

The Protocol itself is a port of the domain (``app.domain.ports.LedgerGateway``), next to
the queue and channel ports, so the receiver service depends on no database code.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import MissingGreenlet
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from app.domain.ports import LedgerGateway

from .core import CoreLedger
from .postgres import STATEMENTS_IN_FLIGHT, PgLedger
from .sqlite import SqliteLedger

__all__ = ["CoreLedger", "LedgerGateway", "PgLedger", "SqliteLedger", "ledger_for"]


def ledger_for(
    engine: AsyncEngine, *, raw_connections: int, statements_in_flight: int = STATEMENTS_IN_FLIGHT
) -> LedgerGateway:
    """The fastest gateway for the engine's database: raw asyncpg on PostgreSQL when it is
    given connections of its own (``engine.connection_budget``), SQLite's with its claims
    and finalizes sharing transactions, else SQLAlchemy Core.
    ``statements_in_flight``: group statements of each kind running at once (``PgLedger``)."""
    if engine.dialect.name == "sqlite":
        return SqliteLedger(engine)
    if raw_connections < 1 or engine.dialect.driver != "asyncpg":
        return CoreLedger(engine)
    ledger = PgLedger(engine, size=raw_connections, statements_in_flight=statements_in_flight)

    # The raw pool lives and dies with the engine: whoever disposes the engine (the app's
    # lifespan, a CLI command, a test fixture) closes it too.
    @event.listens_for(engine.sync_engine, "engine_disposed")
    def _close(_engine: Any) -> None:
        try:
            await_only(ledger.close())  # AsyncEngine.dispose() runs in SQLAlchemy's greenlet
        except MissingGreenlet:  # a synchronous dispose: no loop to close politely on
            ledger.terminate()

    return ledger
