"""``/healthz`` (process up, no I/O) and ``/readyz`` (database reachable, schema at head)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.db.migrations import head_revision

from .deps import ContainerDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(container: ContainerDep) -> JSONResponse:
    """Ready when the database answers and its schema is at the migrations' head."""
    expected = head_revision()
    try:
        async with container.engine.connect() as conn:
            current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except Exception as error:  # any database failure means "not ready"
        return JSONResponse(
            {"status": "unavailable", "database": type(error).__name__}, status_code=503
        )
    if current != expected:
        return JSONResponse(
            {"status": "migrations_pending", "schema": current, "head": expected}, status_code=503
        )
    return JSONResponse({"status": "ready", "schema": current})
