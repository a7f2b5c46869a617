"""The templates API (bearer ``REMINDERS_API_TOKEN``): kinds, their data fields, previews.

A preview renders through the renderer the receiver sends with, so what it shows is what a
send of that kind, customer and data would deliver, and a channel that cannot be sent shows
the error class and message the send's ledger row would record.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict, Field

from app.services import templates as service

from .answers import At, Channel, ReminderWarning
from .deps import ConnectionDep, ContainerDep, require_api_token
from .inputs import ApiModel, Instant, SmallData
from .reminders import ID_PATTERN, KIND_PATTERN, Channels, CustomerIn, customer_fields

router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)], tags=["templates"])

Kind = Annotated[str, Path(pattern=KIND_PATTERN, max_length=100)]
_BOTH_CHANNELS = list(Channel)


class TemplateField(BaseModel):
    """A ``data`` key a kind's email templates read."""

    name: str
    required: bool = Field(description="read without a default: a send without it fails")


class TemplateOut(BaseModel):
    """One kind: its channels, whether its email has an HTML part, the data it reads."""

    kind: str
    channels: list[Channel]
    html: bool
    fields: list[TemplateField]


class TemplateList(BaseModel):
    """Every kind with email templates (webhook-only reminders may use any kind)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "items": [
                        {
                            "kind": "renewal",
                            "channels": ["email", "webhook"],
                            "html": False,
                            "fields": [{"name": "plan", "required": False}],
                        }
                    ]
                }
            ]
        }
    )

    items: list[TemplateOut]


class PreviewIn(ApiModel):
    """What to render: a stored customer (``customer_id``) or an inline one, and the data."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"customer_id": "c1", "data": {"plan": "Pro"}}]},
    )

    customer_id: str | None = Field(default=None, pattern=ID_PATTERN, max_length=200)
    customer: CustomerIn | None = None
    data: SmallData = Field(default_factory=dict)
    channels: Channels = Field(default_factory=_BOTH_CHANNELS.copy)
    due_at: Instant | None = Field(default=None, description="default: now")


class PreviewMessage(BaseModel):
    """One channel's message as a send would deliver it, or the error it would record."""

    channel: Channel
    recipient: str | None = None
    subject: str | None = None
    text: str | None = None
    html: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | None = Field(default=None, description="the webhook's JSON body")
    error_class: str | None = Field(
        description="as a send records it: no_recipient, template_missing, template_error"
    )
    error: str | None
    warnings: list[ReminderWarning] = Field(
        default_factory=list,
        description="what may stop a send (recipient_unsupported: an address only servers "
        "offering SMTPUTF8 take)",
    )


class PreviewOut(BaseModel):
    """The rendered messages, one per channel asked for."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kind": "renewal",
                    "due_at": "2026-12-01T09:00:00+00:00",
                    "messages": [
                        {
                            "channel": "email",
                            "recipient": "c1@example.com",
                            "subject": "Your Pro renews on 2026-12-01",
                            "text": "Hello,\n\nYour Pro renews on 2026-12-01.\n",
                            "html": None,
                            "headers": {},
                            "body": None,
                            "error_class": None,
                            "error": None,
                        }
                    ],
                }
            ]
        }
    )

    kind: str
    due_at: At
    messages: list[PreviewMessage]


@router.get("/templates", response_model=TemplateList)
async def list_templates(container: ContainerDep) -> dict[str, Any]:
    """The kinds with email templates, their channels and the data fields they read."""
    return {"items": service.describe_templates(container.renderer)}


@router.post("/templates/{kind}/preview", response_model=PreviewOut)
async def preview_template(
    kind: Kind, body: PreviewIn, conn: ConnectionDep, container: ContainerDep
) -> dict[str, Any]:
    """Render a kind for a customer and data exactly as a send would (nothing is sent)."""
    inline = customer_fields(body.customer) if body.customer is not None else None
    customer = await service.preview_customer(conn, body.customer_id, inline)
    due_at = body.due_at or container.clock()
    messages = service.render_preview(
        container.renderer,
        customer,
        kind=kind,
        channels=body.channels,
        data=body.data,
        due_at=due_at,
    )
    return {"kind": kind, "due_at": due_at, "messages": messages}
