"""Postmark's webhooks: HTTP Basic credentials set on the webhook URL.

Postmark signs nothing; its documented protection is Basic auth on the webhook
(``https://user:password@host/events/email/postmark``), checked here in constant time
against ``REMINDERS_POSTMARK_WEBHOOK_USER`` / ``_PASSWORD``. One record per post:
``RecordType`` ``Delivery`` (``MessageID``, ``Recipient``, ``DeliveredAt``), ``Bounce``
(``ID``, ``Type`` such as ``HardBounce`` / ``SoftBounce`` / ``Transient``, ``MessageID``,
``Email``, ``BouncedAt``, ``Description``) and ``SpamComplaint`` (same fields as a bounce).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from datetime import datetime
from typing import Any

from pydantic import SecretStr

from app.domain.email_events import EventKind, ProviderEvent
from app.domain.errors import Unauthenticated
from app.domain.messages import PushRequest

from .common import event, field, instant, load_json, text

# Bounce types that say the address will never accept mail; the soft ones may recover.
HARD_TYPES = frozenset({"HardBounce", "BadEmailAddress", "ManuallyDeactivated"})
SOFT_TYPES = frozenset({"SoftBounce", "Transient", "DnsError"})


class PostmarkEvents:
    """Checks Basic credentials and reads Postmark's webhook records."""

    name = "postmark"

    def __init__(self, user: str, password: SecretStr) -> None:
        self._expected = f"{user}:{password.get_secret_value()}".encode()

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the Basic credentials are the configured ones."""
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            given = b""
        if scheme.lower() != "basic" or not hmac.compare_digest(given, self._expected):
            raise Unauthenticated("Postmark webhook credentials do not match")

    def parse(self, request: PushRequest, *, now: datetime) -> list[ProviderEvent]:
        """The record's event (none for record types we do not act on)."""
        body = load_json(request.body)
        record_type = field(body, "RecordType")
        if record_type == "Delivery":
            return [self._delivery(body, now)]
        if record_type in ("Bounce", "SpamComplaint"):
            kind = _bounce_kind(record_type, field(body, "Type"))
            return [] if kind is None else [self._bounce(body, kind, now)]
        return []

    def _delivery(self, body: dict[str, Any], now: datetime) -> ProviderEvent:
        message_id = text(body.get("MessageID"), "MessageID")
        recipient = body.get("Recipient")
        return event(
            self.name, f"delivery:{message_id}:{recipient}", EventKind.DELIVERED,
            occurred_at=instant(body.get("DeliveredAt"), fallback=now), email=recipient,
            message_id=message_id, detail=body.get("Details"),
        )  # fmt: skip

    def _bounce(self, body: dict[str, Any], kind: EventKind, now: datetime) -> ProviderEvent:
        record_id = body.get("ID")
        if isinstance(record_id, bool) or not isinstance(record_id, int | str):
            record_id = text(record_id, "ID")
        detail = f"{body.get('Type')}: {body.get('Description') or ''}"
        return event(
            self.name, f"{body.get('RecordType')}:{record_id}", kind,
            occurred_at=instant(body.get("BouncedAt"), fallback=now), email=body.get("Email"),
            message_id=body.get("MessageID"), detail=detail,
        )  # fmt: skip


def _bounce_kind(record_type: str, bounce_type: Any) -> EventKind | None:
    if record_type == "SpamComplaint" or bounce_type == "SpamComplaint":
        return EventKind.COMPLAINT
    if bounce_type in HARD_TYPES:
        return EventKind.HARD_BOUNCE
    return EventKind.SOFT_BOUNCE if bounce_type in SOFT_TYPES else None
