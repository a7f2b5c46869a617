"""``/healthz`` (process up, no I/O) and ``/readyz`` (database reachable, schema at head)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.db.migrations import applied_revisions, head_revisions

from .deps import ContainerDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(container: ContainerDep) -> JSONResponse:
    """Ready when the database answers and its schema is at the migrations' head."""
    expected = head_revisions()
    limit = container.settings.readyz_timeout_seconds
    try:
        # A short bound: a load balancer's probe must not hang on a stuck pool or network.
        async with asyncio.timeout(limit), container.engine.connect() as conn:
            current = await applied_revisions(conn)
    except TimeoutError:
        return JSONResponse(
            {"status": "unavailable", "database": f"no answer within {limit:g}s"}, status_code=503
        )
    except Exception as error:  # any database failure means "not ready"
        return JSONResponse(
            {"status": "unavailable", "database": type(error).__name__}, status_code=503
        )
    if current != expected:
        return JSONResponse(
            {"status": "migrations_pending", "schema": sorted(current), "head": sorted(expected)},
            status_code=503,
        )
    return JSONResponse({"status": "ready", "schema": sorted(current)})
