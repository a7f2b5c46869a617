"""Admin sessions ended by logout: recorded so that no copy of the cookie works again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import admin_sessions_repo


async def is_revoked(conn: AsyncConnection, session_id: str) -> bool:
    """True when the session was logged out."""
    return await admin_sessions_repo.is_revoked(conn, session_id)


async def revoke(
    conn: AsyncConnection, session_id: str, *, expires_at: datetime, now: datetime
) -> None:
    """End a session until its cookie would have expired anyway."""
    await admin_sessions_repo.revoke(conn, session_id, expires_at=expires_at, now=now)
