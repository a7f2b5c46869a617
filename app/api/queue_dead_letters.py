"""The embedded queue's dead list (bearer ``REMINDERS_ADMIN_TOKEN``): list and redrive."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel, ConfigDict, Field

from app.services import embedded_dead as service

from .deps import ConnectionDep, ContainerDep, require_admin_token
from .inputs import Text
from .operator_answers import DeadMessagePage, DeadMessagesRedriven, documented

router = APIRouter(
    prefix="/v1/queues/embedded",
    dependencies=[Depends(require_admin_token)],
    tags=["queues"],
)


class RedriveMessages(BaseModel):
    """Which dead messages to put back in the queue."""

    model_config = ConfigDict(extra="forbid")
    message_ids: list[Annotated[Text, Field(min_length=1, max_length=64)]] = Field(
        min_length=1, max_length=service.MAX_PAGE
    )


@router.get("/dead", **documented(DeadMessagePage))
async def list_dead_messages(
    conn: ConnectionDep,
    cursor: Annotated[Text | None, Query(max_length=80)] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """Messages the embedded queue gave up on, with cursor pagination."""
    page = await service.list_dead_messages(conn, cursor=cursor, limit=limit)
    return jsonable_encoder({"items": page.items, "next_cursor": page.next_cursor})


@router.post("/dead/redrive", **documented(DeadMessagesRedriven))
async def redrive_dead_messages(
    body: RedriveMessages, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Put dead messages back (ready now, fresh redelivery budget); the ids that moved."""
    moved = await service.redrive_dead_messages(conn, body.message_ids, now=container.clock())
    return {"redriven": moved, "count": len(moved)}
