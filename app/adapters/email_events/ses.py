"""Amazon SES notifications through an SNS HTTPS subscription.

The SNS envelope is verified by the SNS push format's own verifier (RSA signature over the
documented fields, certificate only from SNS hosts, ``TopicArn`` among
``REMINDERS_SES_EVENTS_TOPIC_ARNS``) and a ``SubscriptionConfirmation`` is confirmed the same
way. The envelope's ``Message`` is SES's JSON: ``notificationType`` (identity
notifications) or ``eventType`` (configuration-set event publishing) — ``Bounce``
(``bounce.bounceType`` ``Permanent``, ``Transient`` or ``Undetermined``,
``bouncedRecipients``), ``Complaint`` (``complainedRecipients``), ``Delivery``
(``delivery.recipients``) and ``DeliveryDelay`` (``delayedRecipients``) — with
``mail.messageId``, the id ``SendEmail`` answered. Each recipient is one event, named by
the SNS ``MessageId`` and its position.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.domain.email_events import EventKind, ProviderEvent
from app.domain.errors import MalformedEvent
from app.domain.messages import PushRequest
from app.domain.ports import ControlMessages, PushFormat

from .common import event, field, instant, load_json, text


class SesEvents:
    """SES events in SNS envelopes, authenticated by an SNS push format."""

    name = "ses"

    def __init__(self, sns: Any) -> None:
        self._sns: PushFormat = sns  # an SnsPushFormat for the SES topics (also ControlMessages)
        self._control: ControlMessages = sns

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """SNS's signature and our topic, as for SNS pushes."""
        await self._sns.authenticate(request, now=now)

    async def handle_control(self, request: PushRequest) -> str | None:
        """Confirm the subscription of an SES topic (None for a notification)."""
        return await self._control.handle_control(request)

    def parse(self, request: PushRequest, *, now: datetime) -> list[ProviderEvent]:
        """One event per recipient the notification names."""
        envelope = load_json(request.body)
        sns_id = text(field(envelope, "MessageId"), "MessageId")
        message = field(envelope, "Message")
        notification = load_json(message.encode() if isinstance(message, str) else b"")
        kind_name = field(notification, "notificationType") or field(notification, "eventType")
        reader = _READERS.get(str(kind_name))
        if reader is None:
            return []
        mail = field(notification, "mail")
        message_id = field(mail, "messageId") if isinstance(mail, dict) else None
        part = field(notification, _PART[str(kind_name)])
        if not isinstance(part, dict):
            raise MalformedEvent(f"SES {kind_name} notification without its details")
        occurred = instant(part.get("timestamp"), fallback=now)
        return [
            event(
                self.name, f"{sns_id}:{n}", kind, occurred_at=occurred, email=address,
                message_id=message_id, detail=detail,
            )
            for n, (kind, address, detail) in enumerate(reader(part))
        ]  # fmt: skip


Found = list[tuple[EventKind, Any, Any]]


def _bounces(part: dict[str, Any]) -> Found:
    kind = EventKind.HARD_BOUNCE if part.get("bounceType") == "Permanent" else EventKind.SOFT_BOUNCE
    summary = f"{part.get('bounceType')}/{part.get('bounceSubType')}"
    return [
        (kind, r.get("emailAddress"), f"{summary}: {r.get('diagnosticCode') or ''}")
        for r in _objects(part.get("bouncedRecipients"))
    ]


def _complaints(part: dict[str, Any]) -> Found:
    detail = part.get("complaintFeedbackType")
    return [
        (EventKind.COMPLAINT, r.get("emailAddress"), detail)
        for r in _objects(part.get("complainedRecipients"))
    ]


def _deliveries(part: dict[str, Any]) -> Found:
    recipients = part.get("recipients")
    addresses = recipients if isinstance(recipients, list) else []
    return [(EventKind.DELIVERED, a, part.get("smtpResponse")) for a in addresses]


def _delays(part: dict[str, Any]) -> Found:
    return [
        (EventKind.DEFERRED, r.get("emailAddress"), part.get("delayType"))
        for r in _objects(part.get("delayedRecipients"))
    ]


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


_READERS: dict[str, Callable[[dict[str, Any]], Found]] = {
    "Bounce": _bounces,
    "Complaint": _complaints,
    "Delivery": _deliveries,
    "DeliveryDelay": _delays,
}
_PART = {"Bounce": "bounce", "Complaint": "complaint", "Delivery": "delivery",
         "DeliveryDelay": "deliveryDelay"}  # fmt: skip
