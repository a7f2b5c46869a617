"""The receiver's view of the suppression list (``SuppressionList``) on the engine's pool."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.ports import SuppressionList
from app.domain.suppression import Suppression

from . import suppressions_repo
from .engine import autocommit
from .ledger.core import connection_failures_as_unavailable


class DbSuppressionList(SuppressionList):
    """One statement per call, in autocommit: nothing is held while a provider is called."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.autocommit = autocommit(engine)

    async def reason_for(self, email: str) -> str | None:
        """Why a normalized address is suppressed, or None."""
        # An unreachable database is LedgerUnavailable, as for the ledger's own reads: the
        # delivery is answered "retry", never 500.
        async with connection_failures_as_unavailable(), self.autocommit.connect() as conn:
            return await suppressions_repo.reason_for(conn, email)

    async def suppress(self, entry: Suppression, *, now: datetime) -> bool:
        """Add (or strengthen) one suppression in its own transaction."""
        async with connection_failures_as_unavailable(), self.engine.begin() as conn:
            return await suppressions_repo.add_suppression(conn, entry, now=now)
