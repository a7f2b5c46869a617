"""``/healthz`` (process up, no I/O) and ``/readyz`` (database reachable, schema at head).

Both answer ``HEAD`` too (the same status, no body): some load balancers probe with HEAD.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from app.db.readiness import inspect_database

from .answers import HealthAnswer, ReadinessAnswer
from .deps import ContainerDep

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=None, responses={200: {"model": HealthAnswer}})
async def get_health() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.head("/healthz", include_in_schema=False)
async def healthz_head() -> Response:
    """``/healthz`` for probes that send HEAD."""
    return Response(status_code=200)


@router.get(
    "/readyz",
    responses={
        200: {"model": ReadinessAnswer, "description": "ready"},
        503: {"model": ReadinessAnswer, "description": "not ready, with the reason and fix"},
    },
)
async def get_readiness(container: ContainerDep) -> JSONResponse:
    """Ready when the database answers and its schema is at the migrations' head; otherwise
    503 with the same one-line reason (and fix) that ``reminders serve`` gives."""
    # A short bound: a load balancer's probe must not hang on a stuck pool or network.
    # Its own connection (container.readiness_engine): the API's load cannot starve it.
    state = await inspect_database(
        container.readiness_engine, timeout=container.settings.readyz_timeout_seconds
    )
    body: dict[str, object] = {"status": state.status.value}
    if not state.ready:
        body["reason"] = state.reason
    if state.schema or state.head:
        body |= {"schema": list(state.schema), "head": list(state.head)}
    return JSONResponse(body, status_code=200 if state.ready else 503)


@router.head("/readyz", include_in_schema=False)
async def readyz_head(container: ContainerDep) -> Response:
    """``/readyz`` for probes that send HEAD: its status, no body."""
    return Response(status_code=(await get_readiness(container)).status_code)
