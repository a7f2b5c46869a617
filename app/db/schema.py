"""The whole schema: every table module imported, so ``metadata`` holds every table.

Alembic's autogenerate and ``alembic check`` compare this metadata with the database.
"""

from __future__ import annotations

from sqlalchemy import MetaData

from . import (  # noqa: F401  (imported for their tables)
    admin_session_tables,
    deliverability_tables,
    ledger_reading_tables,
    queue_tables,
    schedule_tables,
    unsubscribe_tables,
)
from .tables import Base

metadata: MetaData = Base.metadata
