"""SendGrid's signed Event Webhook: ECDSA P-256 with SHA-256 over ``timestamp + raw body``.

Headers ``X-Twilio-Email-Event-Webhook-Signature`` (base64 DER signature) and
``X-Twilio-Email-Event-Webhook-Timestamp``; the verification key is
``REMINDERS_SENDGRID_WEBHOOK_PUBLIC_KEY`` exactly as SendGrid's settings page shows it (the
base64 of the DER SubjectPublicKeyInfo; a PEM block is accepted too). This is what
SendGrid's own ``EventWebhook.verify_signature`` helper does. The body is a JSON array of
events, each with ``sg_event_id`` (unique), ``sg_message_id`` (the ``X-Message-Id`` the
send answered, followed by ``.`` and SendGrid's filter suffix), ``email``, ``timestamp``
(Unix seconds) and ``event``. A ``bounce`` of ``type`` ``blocked`` is temporary; ``bounce``
proper is permanent; ``dropped`` names SendGrid's reason (a suppressed or invalid address).

``cryptography`` is imported when this source is built (``[aws]`` extra), never at import.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from pydantic import SecretStr

from app.domain.email_events import EventKind, ProviderEvent
from app.domain.errors import ConfigError, MalformedEvent, Unauthenticated
from app.domain.messages import PushRequest

from .common import event, field, instant, load_json, text

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
_KINDS = {
    "delivered": EventKind.DELIVERED,
    "spamreport": EventKind.COMPLAINT,
    "deferred": EventKind.DEFERRED,
}


def load_public_key(value: SecretStr) -> Any:
    """The EC public key from SendGrid's base64 DER (or a PEM block); ``ConfigError`` else."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    raw = value.get_secret_value().strip()
    try:
        if raw.startswith("-----BEGIN"):
            key = load_pem_public_key(raw.encode())
        else:
            key = load_der_public_key(base64.b64decode(raw, validate=True))
    except (ValueError, binascii.Error):
        key = None
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ConfigError(
            "REMINDERS_SENDGRID_WEBHOOK_PUBLIC_KEY is not the verification key SendGrid shows "
            "(Settings > Mail Settings > Event Webhook > Signature Verification)"
        )
    return key


class SendGridEvents:
    """Verifies and reads SendGrid's Event Webhook posts."""

    name = "sendgrid"

    def __init__(self, public_key: SecretStr) -> None:
        self._key = load_public_key(public_key)

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless SendGrid's key signed timestamp + body."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        signature = request.headers.get(SIGNATURE_HEADER, "")
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        if not signature or not timestamp:
            raise Unauthenticated("SendGrid signature headers are missing")
        try:
            decoded = base64.b64decode(signature, validate=True)
            signed = timestamp.encode() + request.body
            self._key.verify(decoded, signed, ec.ECDSA(hashes.SHA256()))
        except (InvalidSignature, binascii.Error, ValueError, UnicodeEncodeError):
            raise Unauthenticated("SendGrid signature does not match") from None

    def parse(self, request: PushRequest, *, now: datetime) -> list[ProviderEvent]:
        """Every event of the array we act on."""
        body = load_json(request.body)
        if not isinstance(body, list):
            raise MalformedEvent("SendGrid posts a JSON array of events")
        return [found for item in body if (found := self._event(item, now)) is not None]

    def _event(self, item: Any, now: datetime) -> ProviderEvent | None:
        kind = _kind(str(field(item, "event")), item)
        if kind is None:
            return None
        message_id = field(item, "sg_message_id")
        if isinstance(message_id, str):
            message_id = message_id.split(".", 1)[0]  # the X-Message-Id the send answered
        return event(
            self.name, text(field(item, "sg_event_id"), "sg_event_id"), kind,
            occurred_at=instant(field(item, "timestamp"), fallback=now),
            email=field(item, "email"), message_id=message_id, detail=_detail(item),
        )  # fmt: skip


def _kind(name: str, item: dict[str, Any]) -> EventKind | None:
    if name == "bounce":
        blocked = item.get("type") == "blocked"
        return EventKind.SOFT_BOUNCE if blocked else EventKind.HARD_BOUNCE
    if name == "dropped":
        reason = str(item.get("reason", "")).lower()
        if "spam" in reason:
            return EventKind.COMPLAINT
        return EventKind.HARD_BOUNCE if "bounce" in reason or "invalid" in reason else None
    return _KINDS.get(name)


def _detail(item: dict[str, Any]) -> str | None:
    parts = [str(item[name]) for name in ("type", "status", "reason", "response") if item.get(name)]
    return " ".join(parts) or None
