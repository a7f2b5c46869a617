"""Resend's event webhook: Standard Webhooks (Svix) signatures over the raw body.

Headers ``svix-id``, ``svix-timestamp``, ``svix-signature`` (the ``webhook-*`` names are
accepted too), verified with the ``standardwebhooks`` library against
``REMINDERS_RESEND_WEBHOOK_SECRET`` (``whsec_…``): HMAC-SHA256 of ``id.timestamp.body``,
timestamp within five minutes. The body is ``{"type", "created_at", "data": {"email_id",
"to": [...], "bounce": {"type", "subType", "message"}, ...}}``; the ``svix-id`` names the
event (Resend resends a failed delivery with the same id). ``email.bounced`` is a
permanent rejection unless its ``bounce.type`` says ``Transient``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import SecretStr
from standardwebhooks import Webhook

from app.domain.email_events import EventKind, ProviderEvent
from app.domain.errors import Unauthenticated
from app.domain.messages import PushRequest

from .common import event, field, instant, load_json

_KINDS = {
    "email.delivered": EventKind.DELIVERED,
    "email.bounced": EventKind.HARD_BOUNCE,
    "email.complained": EventKind.COMPLAINT,
    "email.delivery_delayed": EventKind.DEFERRED,
}
_HEADERS = ("id", "timestamp", "signature")


class ResendEvents:
    """Verifies and reads Resend's webhook posts."""

    name = "resend"

    def __init__(self, secret: SecretStr) -> None:
        self._webhook = Webhook(secret.get_secret_value())

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the signature matches and is recent."""
        headers = {}
        for name in _HEADERS:
            value = request.headers.get(f"svix-{name}") or request.headers.get(f"webhook-{name}")
            if value:
                headers[f"webhook-{name}"] = value
        try:
            self._webhook.verify(request.body, headers, json_parse=False)
        except Exception:  # the library raises several types for forged or garbled headers
            raise Unauthenticated("Resend (Svix) signature does not match") from None

    def parse(self, request: PushRequest, *, now: datetime) -> list[ProviderEvent]:
        """The one event of a post (none for types we do not act on)."""
        body = load_json(request.body)
        kind = _KINDS.get(str(field(body, "type")))
        if kind is None:
            return []
        data = field(body, "data")
        bounce = field(data, "bounce") if kind == EventKind.HARD_BOUNCE else None
        if isinstance(bounce, dict) and str(bounce.get("type", "")).lower() == "transient":
            kind = EventKind.SOFT_BOUNCE
        event_id = request.headers.get("svix-id") or request.headers.get("webhook-id") or ""
        occurred = instant(field(body, "created_at"), fallback=now)
        recipients = field(data, "to")
        addresses = recipients if isinstance(recipients, list) else [recipients]
        detail = bounce.get("message") if isinstance(bounce, dict) else None
        return [
            event(
                self.name, f"{event_id}:{n}" if n else event_id, kind, occurred_at=occurred,
                email=address, message_id=field(data, "email_id"), detail=detail,
            )
            for n, address in enumerate(addresses)
        ]  # fmt: skip
