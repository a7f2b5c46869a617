"""Revoked admin sessions (migration 0010): a logout ends its cookie on every process."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import Index, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base


class AdminSessionRevocation(Base):
    """One logged-out session id; kept until the cookie would have expired anyway."""

    __tablename__ = "admin_session_revocations"
    __table_args__ = (Index("ix_admin_session_revocations_expires_at", "expires_at"),)

    session_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    expires_at: Mapped[datetime]
    revoked_at: Mapped[datetime]


admin_session_revocations = cast(Table, AdminSessionRevocation.__table__)
