"""Templates you can see before you send: which kinds exist, what data they read, and a
preview rendered by the receiver's own renderer with the errors a send would record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.adapters.rendering import Renderer
from app.db import customers_repo
from app.domain.addresses import UNSUPPORTED, smtputf8_note
from app.domain.errors import InvalidInput, PermanentProviderError
from app.domain.ledger import truncate_error
from app.domain.messages import CustomerView, ReminderView

from .reminders import missing_recipient

PREVIEW_ID = "preview"  # the reminder (and inline customer) id a preview renders with


def describe_templates(renderer: Renderer) -> list[dict[str, Any]]:
    """Every kind with email templates: its channels, whether it has HTML, and the ``data``
    fields its email templates read (webhooks carry ``data`` whole, any kind)."""
    return [
        {
            "kind": kind,
            "channels": ["email", "webhook"],
            "html": renderer.has_html(kind),
            "fields": [
                {"name": field.name, "required": field.required}
                for field in renderer.data_fields(kind)
            ],
        }
        for kind in renderer.kinds()
    ]


async def preview_customer(
    conn: AsyncConnection, customer_id: str | None, inline: Mapping[str, Any] | None
) -> CustomerView:
    """The customer a preview renders for: a stored one by id, or the inline fields."""
    if (customer_id is None) == (inline is None):
        raise InvalidInput("customer_id", "give exactly one of customer_id and customer")
    if inline is not None:
        return _customer_view(PREVIEW_ID, {**inline, "unsubscribed_at": None})
    row = await customers_repo.get_customer(conn, customer_id or "")
    if row is None:
        raise InvalidInput("customer_id", f"no customer {customer_id!r}")
    return _customer_view(row["id"], row)


def _customer_view(customer_id: str, fields: Mapping[str, Any]) -> CustomerView:
    return CustomerView(
        id=customer_id,
        email=fields.get("email"),
        webhook_url=fields.get("webhook_url") and str(fields["webhook_url"]),
        time_zone=fields.get("time_zone") or "UTC",
        opted_out_channels=frozenset(fields.get("opted_out_channels") or ()),
        unsubscribed_at=fields.get("unsubscribed_at"),
    )


def render_preview(
    renderer: Renderer,
    customer: CustomerView,
    *,
    kind: str,
    channels: Sequence[str],
    data: Mapping[str, Any],
    due_at: datetime,
    reminder_id: str = PREVIEW_ID,
) -> list[dict[str, Any]]:
    """One message per channel as a send would render it, or the error class and message
    the send's ledger row would record (``no_recipient``, ``template_error``, …)."""
    reminder = ReminderView(
        id=reminder_id,
        customer_id=customer.id,
        kind=kind,
        state="scheduled",
        due_at=due_at,
        expires_at=None,
        channels=tuple(channels),
        data=dict(data),
        schedule_version=1,
    )
    return [_render_channel(renderer, reminder, customer, channel) for channel in channels]


def _render_channel(
    renderer: Renderer, reminder: ReminderView, customer: CustomerView, channel: str
) -> dict[str, Any]:
    answer: dict[str, Any] = {"channel": channel, "error_class": None, "error": None}
    field = missing_recipient(
        {"email": customer.email, "webhook_url": customer.webhook_url}, channel
    )
    try:
        message = renderer.render(reminder, customer, channel)
    except PermanentProviderError as error:
        return answer | {"error_class": error.detail_class, "error": truncate_error(str(error))}
    answer |= {
        "recipient": message.recipient or None,
        "subject": message.subject or None,
        "text": message.text or None,
        "html": message.html,
        "headers": dict(message.headers),
        "body": dict(message.body) if message.body is not None else None,
    }
    if field is not None:  # rendered, but the provider would refuse it
        answer |= {"error_class": "no_recipient", "error": f"customer has no {field}"}
    note = smtputf8_note(customer.email) if channel == "email" else None
    if note is not None:
        answer["warnings"] = [{"code": UNSUPPORTED, "field": "email", "message": note}]
    return answer
