"""Fixtures the ledger tests share: an engine on the test database, and the ledger gateway
under test (parametrize ``implementation`` with ``IMPLEMENTATIONS``). The integration tests get
them from their conftest; a test elsewhere imports them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.ledger import CoreLedger, PgLedger, SqliteLedger, ledger_for
from app.domain.ports import LedgerGateway

# SQLAlchemy Core on any database, SQLite's group-committing gateway, the raw asyncpg one.
IMPLEMENTATIONS = ["core", "sqlite", "pg"]


@pytest.fixture
async def engine(clean_database_url: str) -> AsyncIterator[AsyncEngine]:
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
def gateway(implementation: str, engine: AsyncEngine, db_backend: str) -> LedgerGateway:
    """SQLAlchemy Core on any database, or the database's own gateway (``ledger_for``)."""
    if implementation == "core":
        return CoreLedger(engine)
    if implementation == "sqlite":
        if db_backend != "sqlite":
            pytest.skip("the group-committing SQLite ledger exists for SQLite only")
        return SqliteLedger(engine)
    if db_backend != "postgresql":
        pytest.skip("the raw asyncpg ledger exists for PostgreSQL only")
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    return ledger
