"""``POST /events/email/{provider}``: provider event webhooks (Resend, SendGrid, Postmark,
SES through SNS), each authenticated as its provider documents (``app/adapters/email_events``).

Answers: 200 for anything authentic, even events about messages we do not know (a provider
retries every non-2xx answer for hours or days); 401 for a bad or missing signature or
credential; 400 for an authentic body that is not the documented shape; 404 for a provider
whose credential is not configured; 413 over the size cap. Never 5xx for bad input.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from app.domain.email_events import SoftBounceRule
from app.domain.errors import NotFound
from app.domain.messages import PushRequest
from app.services.email_events import apply_events

from .deps import ContainerDep, read_capped
from .openapi import ErrorBody

router = APIRouter(prefix="/events/email", tags=["events"])
# A SendGrid post batches many events (SendGrid documents batches under a few megabytes).
MAX_EVENTS_BYTES = 4 * 1024 * 1024


class EventsAnswer(BaseModel):
    """What a provider's post did (repeats of known events count in received, not new)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"received": 1, "new": 1, "matched": 1, "suppressed": 1}]}
    )

    received: int = Field(default=0, description="events read from the post")
    new: int = Field(default=0, description="events not seen before")
    matched: int = Field(default=0, description="new events matched to a send record")
    suppressed: int = Field(default=0, description="addresses added to the suppression list")
    control: str | None = Field(default=None, description="an SNS handshake, when it was one")


_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"model": EventsAnswer},
    400: {"model": ErrorBody, "description": "authentic, but not the provider's documented body"},
    401: {"model": ErrorBody, "description": "signature or credentials do not match"},
    404: {"model": ErrorBody, "description": "no event webhook configured for this provider"},
    413: {"model": ErrorBody, "description": "body over the size cap"},
}


@router.post("/{provider}", response_model=None, responses=_ANSWERS)
async def receive_email_events(provider: str, request: Request, container: ContainerDep) -> Any:
    """Authenticate one provider post, then apply its events (idempotent)."""
    source = container.event_sources.get(provider)
    if source is None:
        raise NotFound(f"no event webhook for {provider!r} is configured")
    body = await read_capped(request, MAX_EVENTS_BYTES)
    pushed = PushRequest(body, request.headers, dict(request.query_params))
    now = container.clock()
    await source.authenticate(pushed, now=now.timestamp())
    handle_control = getattr(source, "handle_control", None)
    if handle_control is not None and (control := await handle_control(pushed)) is not None:
        return {"control": control}
    settings = container.settings
    rule = SoftBounceRule(settings.soft_bounce_limit, settings.soft_bounce_window)
    report = await apply_events(container.engine, source.parse(pushed, now=now), rule=rule, now=now)
    return report.to_json()
