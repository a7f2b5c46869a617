"""``POST /cron/sweep``: the cron HTTP target. Publishes due reminders and returns."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.domain.errors import Unauthenticated
from app.observability import record_sweep
from app.services.sweep import sweep

from .deps import ContainerDep, bearer_token, token_matches

router = APIRouter()
_MAX_CRON_BODY = 4096


def _token_in_body(body: bytes) -> str | None:
    # Infrai's cron.create has no headers field: the token may ride in the stored payload,
    # either at the top level or under "payload".
    if not body or len(body) > _MAX_CRON_BODY:
        return None
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(document, dict) and isinstance(document.get("payload"), dict):
        document = document["payload"]
    token = document.get("token") if isinstance(document, dict) else None
    return token if isinstance(token, str) else None


@router.post("/cron/sweep")
async def cron_sweep(request: Request, container: ContainerDep) -> JSONResponse:
    """Run one bounded sweep; 200 with the report, 502 when the queue refused a batch."""
    expected = container.settings.cron_token
    if not (
        token_matches(bearer_token(request), expected)
        or token_matches(_token_in_body(await request.body()), expected)
    ):
        raise Unauthenticated("a valid cron token is required (bearer header or payload.token)")
    report = await sweep(
        container.engine,
        container.publisher,
        queue_for=container.queue_for,
        clock=container.clock,
        limits=container.sweep_limits,
    )
    record_sweep(report)
    body = {
        "enqueued": report.enqueued,
        "messages": report.messages,
        "remaining": report.remaining,
        "horizon_end": report.horizon_end.isoformat(),
        "duration_ms": report.duration_ms,
    }
    if report.error:
        return JSONResponse({**body, "error": report.error}, status_code=502)
    return JSONResponse(body)
