"""The shared ledger reading for ``/metrics`` (migration 0020): one row, one reader at a time.

Every process of every replica serves ``/metrics`` from a snapshot of the ledger. Reading it
costs seconds of database work on a large ledger, so one process reads (it holds the row's
lease) and every other process adopts what it wrote (``app/services/ledger_metrics.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import JSON, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base

READING_ROW = 1  # the table's only row


class LedgerReading(Base):
    """The last reading of the ledger, when the next is due, and who is taking it."""

    __tablename__ = "ledger_readings"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    reader: Mapped[str | None] = mapped_column(String(64))  # the lease holder's random token
    claimed_until: Mapped[datetime | None]  # the lease: another process may read after it
    taken_at: Mapped[datetime | None]  # when the last reading ended
    next_at: Mapped[datetime | None]  # no reading before: the interval, or longer after a slow one
    snapshot: Mapped[dict[str, Any] | None] = mapped_column(JSON)


ledger_readings = cast(Table, LedgerReading.__table__)
