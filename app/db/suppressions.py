"""The receiver's view of the suppression list (``SuppressionList``) on the engine's pool."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.ports import LedgerGateway, SuppressionList
from app.domain.suppression import Suppression
from app.group_commit import GroupCommit

from . import suppressions_repo
from .ledger.core import connection_failures_as_unavailable


class DbSuppressionList(SuppressionList):
    """Short statements in autocommit: nothing is held while a provider is called.

    Every email send asks ``reason_for`` right before its provider call, so under load many
    deliveries ask at once: their addresses are looked up together, one statement for all
    that queued meanwhile (``GroupCommit``), instead of a pool checkout and a round trip
    each. A caller still gets its answer from a statement that began after it asked. The
    lookup runs where the ledger runs its hot statements (``suppression_reasons``).
    """

    def __init__(
        self, engine: AsyncEngine, ledger: LedgerGateway, *, lookups_in_flight: int = 2
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self._lookups: GroupCommit[str, str | None] = GroupCommit(
            self._reasons, key=None, max_in_flight=lookups_in_flight
        )

    @property
    def lookup_statements(self) -> int:
        """How many lookup statements ran (tests and benchmarks read it)."""
        return self._lookups.statements

    async def reason_for(self, email: str) -> str | None:
        """Why a normalized address is suppressed, or None."""
        return await self._lookups.submit(email)

    async def _reasons(self, emails: Sequence[str]) -> list[str | None]:
        # An unreachable database is LedgerUnavailable, as for the ledger's own reads: the
        # delivery is answered "retry", never 500.
        found = await self.ledger.suppression_reasons(emails)
        return [found.get(email) for email in emails]

    async def suppress(self, entry: Suppression, *, now: datetime) -> bool:
        """Add (or strengthen) one suppression in its own transaction."""
        async with connection_failures_as_unavailable(), self.engine.begin() as conn:
            return await suppressions_repo.add_suppression(conn, entry, now=now)
