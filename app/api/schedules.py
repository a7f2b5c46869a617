"""The schedules API (bearer ``REMINDERS_API_TOKEN``): recurring reminders.

A schedule's occurrences are ordinary reminders with ids ``{schedule_id}:{local date-time}``;
the rules (DST, quiet hours, re-planning) are in ``app.services.schedules`` and
``app.domain.recurrence``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from fastapi.encoders import jsonable_encoder
from pydantic import ConfigDict, Field

from app.domain.queueing import horizon_end
from app.services import listing
from app.services import schedules as service
from app.services.reminders import require_templates

from .answers import ScheduleOut, SchedulePage
from .deps import ConnectionDep, ContainerDep, require_api_token
from .inputs import ApiModel, Instant, SmallData
from .reminders import Channels, Cursor, IdFilter, Limit

router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)], tags=["schedules"])

# Shorter than a reminder id so that ":YYYY-MM-DDTHH:MM" still fits in 200 characters.
SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9:_.@+\-]{0,182}$"
ScheduleId = Annotated[str, Path(pattern=SCHEDULE_ID_PATTERN, max_length=183)]


class ScheduleIn(ApiModel):
    """A recurring reminder: who, what, through which channels, and when in local time."""

    model_config = ConfigDict(extra="forbid")

    customer_id: str = Field(min_length=1, max_length=200)
    kind: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]{0,99}$")
    channels: Channels
    rrule: str | None = Field(default=None, max_length=1000)
    cron: str | None = Field(default=None, max_length=200)
    local_time: str | None = Field(default=None, max_length=5)
    time_zone: str | None = Field(default=None, max_length=64)
    offset_days: int = Field(default=0, ge=-366, le=366)
    starts_at: Instant | None = None
    ends_at: Instant | None = None
    data: SmallData = Field(default_factory=dict)


@router.put(
    "/schedules/{schedule_id}",
    response_model=ScheduleOut,
    responses={201: {"model": ScheduleOut, "description": "created"}},
)
async def put_schedule(
    schedule_id: ScheduleId,
    body: ScheduleIn,
    response: Response,
    conn: ConnectionDep,
    container: ContainerDep,
) -> dict[str, Any]:
    """Idempotent upsert of a schedule (201 when created, 200 otherwise)."""
    require_templates(container.renderer.knows_kind, body.kind, body.channels)
    now = container.clock()
    result = await service.put_schedule(
        conn,
        schedule_id,
        body.model_dump(),
        now=now,
        horizon_end=horizon_end(now, container.publisher),
    )
    response.status_code = 201 if result.created else 200
    return jsonable_encoder(result.schedule)


@router.get("/schedules", response_model=SchedulePage)
async def list_schedules(
    conn: ConnectionDep,
    customer_id: IdFilter = None,
    limit: Limit = listing.DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """Schedules (not deleted) in id order, of one customer if asked, one page at a time."""
    page = await listing.list_schedules(conn, customer_id=customer_id, cursor=cursor, limit=limit)
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/schedules/{schedule_id}", response_model=ScheduleOut)
async def get_schedule(schedule_id: ScheduleId, conn: ConnectionDep) -> dict[str, Any]:
    """A schedule with its next unsent occurrences."""
    return jsonable_encoder(await service.get_schedule(conn, schedule_id))


@router.delete("/schedules/{schedule_id}", response_model=ScheduleOut)
async def delete_schedule(
    schedule_id: ScheduleId, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Stop a schedule; its unsent occurrences are cancelled (queued ones drop on arrival)."""
    return jsonable_encoder(await service.delete_schedule(conn, schedule_id, now=container.clock()))


@router.post("/schedules/{schedule_id}/pause", response_model=ScheduleOut)
async def pause_schedule(
    schedule_id: ScheduleId, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Pause: no new occurrences, unsent ones withdrawn."""
    return jsonable_encoder(await service.pause_schedule(conn, schedule_id, now=container.clock()))


@router.post("/schedules/{schedule_id}/resume", response_model=ScheduleOut)
async def resume_schedule(
    schedule_id: ScheduleId, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Resume: occurrences from now on (none for the paused stretch)."""
    now = container.clock()
    return jsonable_encoder(
        await service.resume_schedule(
            conn, schedule_id, now=now, horizon_end=horizon_end(now, container.publisher)
        )
    )
