"""The receiver's ledger phases, each its own short unit of work, behind one small interface.

``CoreLedger`` runs ``ledger_repo``'s SQLAlchemy Core statements (any database; SQLite
always uses it). ``PgLedger`` (``fast_ledger``) runs the same statements on raw asyncpg
connections; ``ledger_for`` picks it for PostgreSQL. Each method opens and ends its own
connection or transaction, so nothing is held between phases, in particular not while a
provider is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import event
from sqlalchemy.exc import MissingGreenlet
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from app.domain.ledger import Claim, LedgerKey, SendRecordView
from app.domain.messages import ReminderView

from . import ledger_repo
from .engine import autocommit
from .fast_ledger import PgLedger


class LedgerGateway(Protocol):
    """The ledger phases of one delivery; every call is one short unit of work."""

    @property
    def checked_out(self) -> int:
        """Database connections borrowed right now by this gateway."""
        ...

    async def claim_or_read(self, key: LedgerKey, *, now: datetime, lease_until: datetime) -> Claim:
        """Take the lease on the row (creating it) and read the reminder and customer as they
        are now; not claimable: the row as it is now (None when the reminder does not exist)."""
        ...

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        ...

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt."""
        ...

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
    ) -> bool:
        """Fenced finalize; when the row became final, mark the reminder done if all are."""
        ...


class CoreLedger:
    """The ledger phases on SQLAlchemy Core (``ledger_repo``), for any database."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.autocommit = autocommit(engine)  # single statements skip BEGIN/COMMIT

    @property
    def checked_out(self) -> int:
        """Connections checked out of the engine's pool right now."""
        return int(self.engine.pool.checkedout())  # type: ignore[attr-defined]

    async def claim_or_read(self, key: LedgerKey, *, now: datetime, lease_until: datetime) -> Claim:
        """Claim (one statement), then read the send context or the row (another)."""
        async with self.autocommit.connect() as conn:
            claimed = await ledger_repo.claim_send(conn, key, now=now, lease_until=lease_until)
        if claimed is None:
            return Claim(False, await self.get_send_record(key))
        async with self.autocommit.connect() as conn:
            context = await ledger_repo.load_send_context(conn, key.reminder_id)
        return Claim(True, claimed, context)

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        async with self.autocommit.connect() as conn:
            return await ledger_repo.get_send_record(conn, key)

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt (the message was stale)."""
        async with self.autocommit.connect() as conn:
            return await ledger_repo.release_claim(conn, record, now=now)

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
    ) -> bool:
        """Compare-and-set the claimed row and, once every channel is final, the reminder."""
        async with self.engine.begin() as conn:
            return await ledger_repo.finalize_and_settle(
                conn, record, reminder, now=now, values=values
            )


def ledger_for(engine: AsyncEngine) -> CoreLedger | PgLedger:
    """The fastest gateway for the engine's database: raw asyncpg on PostgreSQL."""
    if engine.dialect.name != "postgresql" or engine.dialect.driver != "asyncpg":
        return CoreLedger(engine)
    size = engine.pool.size()  # type: ignore[attr-defined]
    ledger = PgLedger.for_engine(engine, size=size)

    # The gateway's connections live and die with the engine's: whoever disposes the
    # engine (the app's lifespan, a CLI command, a test fixture) closes them too.
    @event.listens_for(engine.sync_engine, "engine_disposed")
    def _close(_engine: Any) -> None:
        try:
            await_only(ledger.close())  # AsyncEngine.dispose() runs in SQLAlchemy's greenlet
        except MissingGreenlet:  # a synchronous dispose: no loop to close politely on
            ledger.pool.terminate()

    return ledger
