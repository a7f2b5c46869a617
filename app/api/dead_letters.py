"""The operator API (bearer ``REMINDERS_ADMIN_TOKEN``): dead letters, send records, redrive."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.encoders import jsonable_encoder
from pydantic import ConfigDict, Field, field_validator

from app.domain.errors import InvalidInput
from app.domain.redrive import DeadLetterFilter, SendFilter, parse_duration
from app.domain.states import SendState
from app.services import dead_letters as service

from .deps import ConnectionDep, Container, ContainerDep, require_admin_token
from .inputs import ApiModel, Text
from .operator_answers import (
    DeadLetterPage,
    DeadLetterShown,
    DeadLetterSummary,
    RedriveReport,
    SendPage,
    documented,
)

router = APIRouter(prefix="/v1", dependencies=[Depends(require_admin_token)])

Status = Literal["open", "redriven", "all"]
_REDRIVEN = {"open": False, "redriven": True, "all": None}


def _duration(name: str, value: str | None) -> timedelta | None:
    if value is None:
        return None
    try:
        return parse_duration(value)
    except ValueError as error:
        raise InvalidInput(name, str(error)) from None


def redrive_context(container: Container) -> service.RedriveContext:
    """The redrive ports of the running service."""
    return service.RedriveContext(
        engine=container.engine,
        publisher=container.publisher,
        queue_for=container.queue_for,
        clock=container.clock,
    )


class DeadLetterQuery(ApiModel):
    """Filters shared by the listing (query string) and the redrive by filter (JSON body)."""

    queue: str | None = None
    channel: str | None = None
    error_class: str | None = None
    reason: str | None = None
    reminder_id: str | None = None
    older_than: str | None = Field(default=None, description="e.g. 30m, 2h, 3d")
    newer_than: str | None = None

    @field_validator("older_than", "newer_than")
    @classmethod
    def _is_duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    def to_filter(self, status: Status = "open") -> DeadLetterFilter:
        """The domain filter these fields describe."""
        return DeadLetterFilter(
            queue=self.queue,
            channel=self.channel,
            error_class=self.error_class,
            reason=self.reason,
            reminder_id=self.reminder_id,
            older_than=_duration("older_than", self.older_than),
            newer_than=_duration("newer_than", self.newer_than),
            redriven=_REDRIVEN[status],
        )


class RedriveByFilter(DeadLetterQuery):
    """``POST /v1/dead-letters/redrive``: open dead letters matching these filters."""

    # A misspelt filter must fail, not silently widen the redrive to everything.
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = False
    limit: int = Field(default=100, ge=1, le=service.MAX_REDRIVE_BATCH)


DryRun = Annotated[bool, Query(description="report what would be published; change nothing")]
Limit = Annotated[int, Query(ge=1, le=service.MAX_PAGE)]
RowId = Annotated[int, Path(ge=1, le=service.MAX_ROW_ID)]


def _page(page: service.Page) -> dict[str, Any]:
    return jsonable_encoder({"items": page.items, "next_cursor": page.next_cursor})


@router.get("/dead-letters", tags=["dead-letters"], **documented(DeadLetterPage))
async def list_dead_letters(
    conn: ConnectionDep,
    container: ContainerDep,
    query: Annotated[DeadLetterQuery, Query()],
    status: Status = "open",
    cursor: Text | None = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Dead letters (open ones by default), oldest first, with cursor pagination."""
    page = await service.list_dead_letters(
        conn, query.to_filter(status), now=container.clock(), cursor=cursor, limit=limit
    )
    return _page(page)


@router.get(
    "/dead-letters/summary",
    tags=["dead-letters"],
    response_model=None,
    responses={200: {"model": DeadLetterSummary}},
)
async def summarize_dead_letters(conn: ConnectionDep, container: ContainerDep) -> dict[str, Any]:
    """Open dead letters grouped by reason and error class, with the oldest age."""
    groups = await service.summarize(conn, now=container.clock())
    return jsonable_encoder({"groups": groups})


@router.post(
    "/dead-letters/redrive",
    tags=["dead-letters"],
    response_model=None,
    responses={200: {"model": RedriveReport}},
)
async def redrive_dead_letters(body: RedriveByFilter, container: ContainerDep) -> dict[str, Any]:
    """Redrive every open dead letter matching the filters (``dry_run`` to preview)."""
    report = await service.redrive_dead_letters(
        redrive_context(container), body.to_filter(), dry_run=body.dry_run, limit=body.limit
    )
    return jsonable_encoder(report.to_json())


@router.get(
    "/dead-letters/{dead_letter_id}",
    tags=["dead-letters"],
    response_model=None,
    responses={200: {"model": DeadLetterShown}},
)
async def get_dead_letter(
    dead_letter_id: RowId, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """One dead letter with its send record, ledger history and redrive preview."""
    shown = await service.show_dead_letter(
        conn, dead_letter_id, now=container.clock(), queue_for=container.queue_for
    )
    return jsonable_encoder(shown)


@router.post(
    "/dead-letters/{dead_letter_id}/redrive",
    tags=["dead-letters"],
    response_model=None,
    responses={200: {"model": RedriveReport}},
)
async def redrive_dead_letter(
    dead_letter_id: RowId, container: ContainerDep, dry_run: DryRun = False
) -> dict[str, Any]:
    """Redrive one dead letter: reset its send record and publish a new message."""
    report = await service.redrive_dead_letter(
        redrive_context(container), dead_letter_id, dry_run=dry_run
    )
    return jsonable_encoder(report.to_json())


@router.get("/sends", tags=["sends"], **documented(SendPage))
async def list_sends(
    conn: ConnectionDep,
    container: ContainerDep,
    state: SendState | None = None,
    stuck: bool = False,
    channel: Text | None = None,
    error_class: Text | None = None,
    outcome: Text | None = None,
    reminder_id: Text | None = None,
    cursor: Text | None = None,
    limit: Limit = 50,
) -> dict[str, Any]:
    """Send records: ``?state=sending&stuck=true`` for sends past their lease,
    ``?state=terminal_failure`` for the terminal failures beside the dead letters."""
    if stuck and state not in (None, SendState.SENDING):
        raise InvalidInput("stuck", "only sends in state 'sending' can be stuck")
    filters = SendFilter(state, stuck, channel, error_class, outcome, reminder_id)
    page = await service.list_sends(
        conn, filters, now=container.clock(), cursor=cursor, limit=limit
    )
    return _page(page)


@router.post(
    "/sends/{send_record_id}/redrive",
    tags=["sends"],
    response_model=None,
    responses={200: {"model": RedriveReport}},
)
async def redrive_send(
    send_record_id: RowId, container: ContainerDep, dry_run: DryRun = False
) -> dict[str, Any]:
    """Redrive one send record (terminal after the data was fixed, stuck, or dead)."""
    report = await service.redrive_send(redrive_context(container), send_record_id, dry_run=dry_run)
    return jsonable_encoder(report.to_json())
