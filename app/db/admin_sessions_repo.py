"""SQL for revoked admin sessions. Nothing here commits."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .admin_session_tables import admin_session_revocations as revocations
from .dialects import insert_for


async def is_revoked(conn: AsyncConnection, session_id: str) -> bool:
    """True when this session id was logged out."""
    stmt = select(revocations.c.session_id).where(revocations.c.session_id == session_id)
    return (await conn.execute(stmt)).first() is not None


async def revoke(
    conn: AsyncConnection, session_id: str, *, expires_at: datetime, now: datetime
) -> None:
    """Record a logout (idempotent) and forget revocations whose cookies have expired."""
    await conn.execute(delete(revocations).where(revocations.c.expires_at < now))
    stmt = insert_for(conn, revocations).values(
        session_id=session_id, expires_at=expires_at, revoked_at=now
    )
    await conn.execute(stmt.on_conflict_do_nothing(index_elements=[revocations.c.session_id]))
