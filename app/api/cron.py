"""``POST /cron/sweep``: the cron HTTP target. Publishes due reminders and returns."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.domain.errors import PayloadTooLarge, Unauthenticated
from app.observability.metrics import record_sweep

from .answers import SweepAnswer
from .deps import ContainerDep, bearer_token, read_capped, token_matches

router = APIRouter(tags=["sweep"])
_MAX_CRON_BODY = 4096


async def _token_in_body(request: Request) -> str | None:
    # Infrai's cron.create has no headers field: the token may ride in the stored payload,
    # either at the top level or under "payload". Read at most 4 KB of an unauthenticated body.
    try:
        body = await read_capped(request, _MAX_CRON_BODY)
    except PayloadTooLarge:
        return None
    if not body:
        return None
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(document, dict) and isinstance(document.get("payload"), dict):
        document = document["payload"]
    token = document.get("token") if isinstance(document, dict) else None
    return token if isinstance(token, str) else None


@router.post(
    "/cron/sweep",
    responses={
        200: {"model": SweepAnswer, "description": "the sweep's report"},
        502: {"model": SweepAnswer, "description": "the queue refused a batch (error set)"},
    },
)
async def run_sweep(request: Request, container: ContainerDep) -> JSONResponse:
    """Run one bounded sweep; 200 with the report, 502 when the queue refused a batch."""
    expected = container.settings.cron_token
    if not (
        token_matches(bearer_token(request), expected)
        or token_matches(await _token_in_body(request), expected)
    ):
        raise Unauthenticated("a valid cron token is required (bearer header or payload.token)")
    report = await container.sweep()
    record_sweep(report)  # the CLI prints its report instead: its stdout stays pure JSON
    return JSONResponse(report.to_json(), status_code=502 if report.error else 200)
