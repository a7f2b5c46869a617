"""The suppression list for operators (bearer ``REMINDERS_ADMIN_TOKEN``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel, ConfigDict, Field

from app.domain.suppression import MAX_ADDRESS_LENGTH, SuppressionReason
from app.services import suppressions as service

from .deps import ConnectionDep, ContainerDep, require_admin_token
from .inputs import ApiModel, Text
from .operator_answers import documented

router = APIRouter(prefix="/v1", dependencies=[Depends(require_admin_token)], tags=["suppressions"])

Email = Annotated[str, Path(min_length=3, max_length=MAX_ADDRESS_LENGTH)]
_EXAMPLE: dict[str, Any] = {
    "email": "Ann@example.com",
    "reason": "hard_bounce",
    "source": "ses",
    "source_event_id": "0100018c-5a0b-4f9e",
    "detail": "Permanent/General: 550 5.1.1 user unknown",
    "created_at": "2026-12-01T09:00:00+00:00",
    "updated_at": "2026-12-01T09:00:00+00:00",
}


class SuppressionRow(BaseModel):
    """An address that receives no email, stored with its domain part lower-cased."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [_EXAMPLE]})

    email: str
    reason: SuppressionReason
    source: str
    source_event_id: str | None = None
    detail: str | None = None
    created_at: str
    updated_at: str


class SuppressionPage(BaseModel):
    """One page of suppressions in address order."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"items": [_EXAMPLE], "next_cursor": None}]}
    )

    items: list[SuppressionRow]
    next_cursor: str | None = Field(description="pass as cursor for the next page")


class SuppressionPut(ApiModel):
    """``PUT /v1/suppressions/{email}``: suppress an address by hand."""

    model_config = ConfigDict(extra="forbid")

    detail: Text | None = Field(default=None, max_length=500, description="why, for the record")


@router.get("/suppressions", **documented(SuppressionPage))
async def list_suppressions(
    conn: ConnectionDep,
    email: Annotated[str | None, Query(min_length=3, max_length=MAX_ADDRESS_LENGTH)] = None,
    domain: Annotated[str | None, Query(min_length=1, max_length=255)] = None,
    reason: SuppressionReason | None = None,
    cursor: Text | None = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_LIMIT)] = 50,
) -> dict[str, Any]:
    """Suppressed addresses in address order (keyset pages), by address, domain or reason."""
    filters = service.SuppressionFilters(email=email, domain=domain, reason=reason)
    page = await service.list_suppressions(conn, filters, cursor=cursor, limit=limit)
    return jsonable_encoder({"items": page.items, "next_cursor": page.next_cursor})


@router.get("/suppressions/{email}", **documented(SuppressionRow))
async def get_suppression(email: Email, conn: ConnectionDep) -> dict[str, Any]:
    """One suppressed address, with why and since when."""
    return jsonable_encoder(await service.show_suppression(conn, email))


@router.put("/suppressions/{email}", **documented(SuppressionRow))
async def put_suppression(
    email: Email, conn: ConnectionDep, container: ContainerDep, body: SuppressionPut | None = None
) -> dict[str, Any]:
    """Suppress an address by hand (reason ``manual``); an existing suppression is kept."""
    row = await service.suppress_by_hand(
        conn, email, source="api", detail=body.detail if body else None, now=container.clock()
    )
    return jsonable_encoder(row)


@router.delete("/suppressions/{email}", **documented(SuppressionRow))
async def delete_suppression(
    email: Email,
    conn: ConnectionDep,
    force: Annotated[bool, Query(description="required to lift a complaint")] = False,
) -> dict[str, Any]:
    """Lift a suppression (a complaint only with ``force=true``); answers what was lifted."""
    return jsonable_encoder(await service.lift_suppression(conn, email, force=force))
