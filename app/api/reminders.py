"""The reminders API (bearer ``REMINDERS_API_TOKEN``): customers and reminders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Depends, Path, Query, Response
from fastapi.encoders import jsonable_encoder
from pydantic import (
    AfterValidator,
    AnyHttpUrl,
    ConfigDict,
    Field,
    field_validator,
)

from app.container import Container
from app.domain.errors import InvalidInput
from app.domain.states import DeliverySummary, ReminderState
from app.services import customers, listing, unsubscribe
from app.services import reminders as service
from app.services.customers import CustomerChange

from .answers import (
    DELIVERY_DESCRIPTION,
    Channel,
    CustomerOut,
    ReminderOut,
    ReminderPage,
    ReminderPut,
)
from .deps import ConnectionDep, ContainerDep, require_api_token
from .inputs import ApiModel, EmailAddress, Instant, SmallData

router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)])

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9:_.@+\-]{0,199}$"
ResourceId = Annotated[str, Path(pattern=ID_PATTERN, max_length=200)]
MAX_URL_LENGTH = 2048  # customers.webhook_url
KIND_PATTERN = r"^[a-z0-9][a-z0-9_.\-]{0,99}$"
# Shared by the lists: an id filter, the page size and the opaque cursor.
IdFilter = Annotated[str | None, Query(pattern=ID_PATTERN, max_length=200)]
Limit = Annotated[
    int, Query(ge=1, le=listing.MAX_LIMIT, description=f"page size, at most {listing.MAX_LIMIT}")
]
Cursor = Annotated[
    str | None,
    Query(
        pattern=r"^[A-Za-z0-9_\-]+$",
        max_length=listing.MAX_CURSOR_LENGTH,
        description="next_cursor of the previous page",
    ),
]


def _unique(channels: list[str]) -> list[str]:
    return list(dict.fromkeys(channels))


def _fits_the_column(url: AnyHttpUrl) -> AnyHttpUrl:
    if len(str(url)) > MAX_URL_LENGTH:
        raise ValueError(f"must be at most {MAX_URL_LENGTH} characters")
    return url


# Shared by reminders and schedules: channels deduplicated in order, data kept small.
Channels = Annotated[list[Channel], Field(min_length=1), AfterValidator(_unique)]
HHMM_PATTERN = r"^([01]\d|2[0-3]):[0-5]\d$"
WebhookUrl = Annotated[AnyHttpUrl, AfterValidator(_fits_the_column)]


class CustomerIn(ApiModel):
    """A customer's contact details and channel preferences."""

    model_config = ConfigDict(extra="forbid")

    email: EmailAddress | None = None
    webhook_url: WebhookUrl | None = None
    time_zone: str = "UTC"
    opted_out_channels: list[Channel] = Field(default_factory=list)
    unsubscribed: bool = False
    # Schedule occurrences inside this daily window (local HH:MM) move to its end.
    quiet_hours_start: str | None = Field(default=None, pattern=HHMM_PATTERN)
    quiet_hours_end: str | None = Field(default=None, pattern=HHMM_PATTERN)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value


class ReminderIn(ApiModel):
    """One reminder: who, what, when and through which channels."""

    model_config = ConfigDict(extra="forbid")

    customer_id: str = Field(min_length=1, max_length=200)
    kind: str = Field(pattern=KIND_PATTERN)
    due_at: Instant
    expires_at: Instant | None = None
    channels: Channels
    data: SmallData = Field(default_factory=dict)


def customer_fields(body: CustomerIn) -> dict[str, Any]:
    """A validated customer body as the customers service takes it (``CustomerChange``)."""
    return body.model_dump(mode="json", exclude={"id"})


async def webhook_refusals(container: Container, urls: Iterable[str | None]) -> dict[str, str]:
    """Why the SSRF guard would refuse each of ``urls`` at send time, for those it would:
    a webhook that can never be delivered is refused at registration, not days later.
    (``TargetCheck`` says what DNS means here; each distinct URL is asked once.)"""
    check = container.webhook_targets
    distinct = sorted({url for url in urls if url})
    if check is None or not distinct:
        return {}
    reasons = await asyncio.gather(*(check.refusal(url) for url in distinct))
    return {url: reason for url, reason in zip(distinct, reasons, strict=True) if reason}


def reminder_values(body: ReminderIn, knows_kind: Callable[[str], bool]) -> dict[str, Any]:
    """A validated reminder body as the registration service takes it, after the checks
    that need more than the body's own fields (``knows_kind``: the renderer's)."""
    service.require_templates(knows_kind, body.kind, body.channels)
    if body.expires_at is not None and body.expires_at <= body.due_at:
        raise InvalidInput("expires_at", "must be after due_at")
    return body.model_dump(exclude={"id"})


def reminder_warnings(
    values: dict[str, Any], container: Container, *, now: datetime
) -> list[dict[str, str]]:
    """What a reminder's answer warns about (a due time already past its usefulness)."""
    grace = container.receiver.policy.usefulness_grace
    return service.usefulness_warnings(values, now=now, grace=grace)


def _customer_out(customer: dict[str, Any]) -> dict[str, Any]:
    out = jsonable_encoder(customer)
    out["unsubscribed"] = customer["unsubscribed_at"] is not None
    return out


@router.put("/customers/{customer_id}", response_model=CustomerOut, tags=["customers"])
async def put_customer(
    customer_id: ResourceId, body: CustomerIn, container: ContainerDep
) -> dict[str, Any]:
    """Create or replace a customer (422 for a webhook_url the SSRF guard refuses)."""
    change = CustomerChange(**customer_fields(body))
    # Checked before the transaction opens: the guard may resolve the host name.
    if refusal := (await webhook_refusals(container, [change.webhook_url])).get(
        change.webhook_url or ""
    ):
        raise InvalidInput("webhook_url", refusal)
    async with container.engine.begin() as conn:
        customer = await customers.put_customer(conn, customer_id, change, now=container.clock())
        return _customer_out(customer)


@router.get("/customers/{customer_id}", response_model=CustomerOut, tags=["customers"])
async def get_customer(customer_id: ResourceId, conn: ConnectionDep) -> dict[str, Any]:
    """One customer."""
    return _customer_out(await customers.get_customer(conn, customer_id))


@router.delete(
    "/customers/{customer_id}/unsubscribes/{channel}",
    response_model=CustomerOut,
    tags=["customers"],
)
async def resubscribe_customer(
    customer_id: ResourceId, channel: Channel, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Re-subscribe: clear the recipient's own unsubscribe from a channel (idempotent).

    Only for a recipient who asked to receive the channel again; a customer PUT never
    clears it.
    """
    await unsubscribe.resubscribe(conn, customer_id, channel, now=container.clock())
    return _customer_out(await customers.get_customer(conn, customer_id))


@router.put(
    "/reminders/{reminder_id}",
    response_model=ReminderPut,
    tags=["reminders"],
    responses={201: {"model": ReminderPut, "description": "created"}},
)
async def put_reminder(
    reminder_id: ResourceId,
    body: ReminderIn,
    response: Response,
    conn: ConnectionDep,
    container: ContainerDep,
) -> dict[str, Any]:
    """Idempotent upsert of a reminder (201 when created, 200 otherwise)."""
    values = reminder_values(body, container.renderer.knows_kind)
    now = container.clock()
    result = await service.put_reminder(conn, reminder_id, values, now=now)
    response.status_code = 201 if result.created else 200
    answer = jsonable_encoder(await service.get_reminder(conn, reminder_id))
    return answer | {"warnings": reminder_warnings(values, container, now=now)}


@router.get("/reminders/{reminder_id}", response_model=ReminderOut, tags=["reminders"])
async def get_reminder(reminder_id: ResourceId, conn: ConnectionDep) -> dict[str, Any]:
    """A reminder with its per-channel send records."""
    return jsonable_encoder(await service.get_reminder(conn, reminder_id))


@router.delete("/reminders/{reminder_id}", response_model=ReminderOut, tags=["reminders"])
async def cancel_reminder(
    reminder_id: ResourceId, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Cancel a reminder; messages already queued are dropped when they arrive."""
    await service.cancel_reminder(conn, reminder_id, now=container.clock())
    return jsonable_encoder(await service.get_reminder(conn, reminder_id))


@router.get("/reminders", response_model=ReminderPage, tags=["reminders"])
async def list_reminders(
    conn: ConnectionDep,
    customer_id: IdFilter = None,
    state: Annotated[ReminderState | None, Query()] = None,
    kind: Annotated[str | None, Query(pattern=KIND_PATTERN, max_length=100)] = None,
    schedule_id: IdFilter = None,
    due_after: Annotated[Instant | None, Query(description="due_at at or after")] = None,
    due_before: Annotated[Instant | None, Query(description="due_at before")] = None,
    limit: Limit = listing.DEFAULT_LIMIT,
    cursor: Cursor = None,
    delivery: Annotated[DeliverySummary | None, Query(description=DELIVERY_DESCRIPTION)] = None,
) -> dict[str, Any]:
    """Reminders in (due_at, id) order, filtered, one page at a time (no send records)."""
    filters = listing.ReminderFilters(
        customer_id, state, kind, schedule_id, due_after, due_before, delivery
    )
    page = await listing.list_reminders(conn, filters, cursor=cursor, limit=limit)
    return {"items": page.items, "next_cursor": page.next_cursor}
