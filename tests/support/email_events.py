"""Provider event posts as each provider sends them, signed the way each documents.

Payload shapes follow the providers' documented examples: Resend's ``email.*`` webhooks
(Standard Webhooks / Svix headers), SendGrid's Event Webhook array (ECDSA P-256 over
timestamp + body), Postmark's ``RecordType`` records (HTTP Basic on the URL) and SES's
notifications inside an SNS envelope.
"""

from __future__ import annotations

import base64
import functools
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from standardwebhooks import Webhook

RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-signing-secret-0001").decode()
POSTMARK_USER, POSTMARK_PASSWORD = "postmark-hook", "s3cret-basic-password"


# --- Resend --------------------------------------------------------------------------------


def resend_event(kind: str, *, email_id: str, to: str, **data: Any) -> dict[str, Any]:
    """A Resend webhook body: ``{"type", "created_at", "data": {...}}``."""
    return {
        "type": kind,
        "created_at": "2026-12-01T09:00:00.000Z",
        "data": {
            "created_at": "2026-12-01T08:59:58.000Z",
            "email_id": email_id,
            "from": "Reminders <reminders@example.com>",
            "to": [to],
            "subject": "Your weekly digest",
            **data,
        },
    }


def resend_post(
    body: dict[str, Any], *, secret: str = RESEND_SECRET, msg_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """The raw body and the ``svix-*`` headers Resend sends with it."""
    raw = orjson.dumps(body)
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    at = datetime.fromtimestamp(int(time.time()), UTC)
    signature = Webhook(secret).sign(msg_id, at, raw.decode())
    headers = {
        "svix-id": msg_id,
        "svix-timestamp": str(int(at.timestamp())),
        "svix-signature": signature,
        "content-type": "application/json",
    }
    return raw, headers


def resend_headers(raw: bytes, msg_id: str, *, prefix: str = "svix") -> dict[str, str]:
    """Headers Resend sends with ``raw``, signed with the standardwebhooks library under
    the ``svix-*`` or the Standard Webhooks ``webhook-*`` names."""
    at = datetime.fromtimestamp(int(time.time()), UTC)
    signature = Webhook(RESEND_SECRET).sign(msg_id, at, raw.decode())
    return {
        f"{prefix}-id": msg_id,
        f"{prefix}-timestamp": str(int(at.timestamp())),
        f"{prefix}-signature": signature,
        "content-type": "application/json",
    }


def resend_delivery_delayed(message_id: str, email: str) -> dict[str, Any]:
    """Resend's documented ``email.delivery_delayed`` body."""
    return {
        "type": "email.delivery_delayed",
        "created_at": "2026-12-01T09:00:00.000Z",
        "data": {
            "broadcast_id": "8b146471-e88e-4322-86af-016cd36fd216",
            "created_at": "2026-12-01T08:59:58.894719+00:00",
            "email_id": message_id,
            "from": "Reminders <reminders@example.com>",
            "to": [email],
            "subject": "Your weekly digest",
            "template_id": "43f68331-0622-4e15-8202-246a0388854b",
            "tags": {"category": "confirm_email"},
        },
    }


# --- SendGrid ------------------------------------------------------------------------------


@functools.cache
def sendgrid_key() -> ec.EllipticCurvePrivateKey:
    """The test's P-256 signing key (SendGrid keeps the private half)."""
    return ec.generate_private_key(ec.SECP256R1())


def sendgrid_public_key(key: ec.EllipticCurvePrivateKey | None = None) -> str:
    """The verification key as SendGrid's settings page shows it: base64 of the DER."""
    der = (
        (key or sendgrid_key())
        .public_key()
        .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return base64.b64encode(der).decode()


def sendgrid_event(event: str, *, message_id: str, email: str, **fields: Any) -> dict[str, Any]:
    """One element of SendGrid's event array (``sg_message_id`` = X-Message-Id + filter)."""
    return {
        "email": email,
        "timestamp": 1764579600,
        "smtp-id": f"<{message_id}@ismtpd0001p1lon1.sendgrid.net>",
        "event": event,
        "category": ["reminders"],
        "sg_event_id": base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="),
        "sg_message_id": f"{message_id}.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC1BC-5.0",
        **fields,
    }


def sendgrid_post(
    events: list[dict[str, Any]], *, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[bytes, dict[str, str]]:
    """The raw body (SendGrid ends it with CRLF) and its signature headers."""
    raw = orjson.dumps(events) + b"\r\n"
    timestamp = str(int(time.time()))
    signature = (key or sendgrid_key()).sign(timestamp.encode() + raw, ec.ECDSA(hashes.SHA256()))
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": timestamp,
        "content-type": "application/json",
    }
    return raw, headers


def sendgrid_documented(kind: str, message_id: str, email: str) -> dict[str, Any]:
    """SendGrid's Event Webhook reference examples of ``kind``, about our message."""
    fields = {
        "bounce_blocked": {
            "event": "bounce", "type": "blocked", "bounce_classification": "Technical",
            "reason": "550 5.7.1 Service unavailable; client host blocked using spamhaus",
            "status": "5.7.1",
        },
        "dropped": {"event": "dropped", "reason": "Bounced Address", "status": "5.0.0"},
        "deferred": {
            "event": "deferred", "domain": "example.com", "from": "reminders@example.com",
            "ip": "168.1.1.1", "response": "400 try again later", "tls": 0, "attempt": "5",
        },
    }[kind]  # fmt: skip
    name = fields.pop("event")
    return sendgrid_event(name, message_id=message_id, email=email, **fields)


# --- Postmark ------------------------------------------------------------------------------


def postmark_bounce(message_id: str, email: str, *, kind: str = "HardBounce", record_id: int = 1):
    """A Postmark bounce webhook record (``RecordType`` Bounce)."""
    return {
        "RecordType": "Bounce",
        "MessageStream": "outbound",
        "ID": record_id,
        "Type": kind,
        "TypeCode": 1 if kind == "HardBounce" else 4096,
        "Name": "Hard bounce" if kind == "HardBounce" else "Soft bounce",
        "Tag": "reminders",
        "MessageID": message_id,
        "ServerID": 23,
        "Description": "The server was unable to deliver your message (ex: unknown user).",
        "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
        "Email": email,
        "From": "reminders@example.com",
        "BouncedAt": "2026-12-01T09:00:00.907Z",
        "DumpAvailable": True,
        "Inactive": True,
        "CanActivate": True,
        "Subject": "Your weekly digest",
        "Content": "",
        "Metadata": {},
    }


def postmark_delivery(message_id: str, email: str) -> dict[str, Any]:
    """A Postmark delivery webhook record."""
    return {
        "RecordType": "Delivery",
        "ServerID": 23,
        "MessageStream": "outbound",
        "MessageID": message_id,
        "Recipient": email,
        "Tag": "reminders",
        "DeliveredAt": "2026-12-01T09:00:01Z",
        "Details": "Test delivery webhook details",
        "Metadata": {},
    }


def postmark_headers(
    user: str = POSTMARK_USER, password: str = POSTMARK_PASSWORD
) -> dict[str, str]:
    """What Postmark sends for ``https://user:password@host/...``."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}", "content-type": "application/json"}


# --- SES -----------------------------------------------------------------------------------


def ses_complaint(message_id: str, email: str) -> dict[str, Any]:
    """An SES complaint notification (``notificationType``)."""
    return {
        "notificationType": "Complaint",
        "complaint": {
            "userAgent": "ExampleCorp Feedback Loop (V0.01)",
            "complainedRecipients": [{"emailAddress": email}],
            "complaintFeedbackType": "abuse",
            "arrivalDate": "2026-12-01T09:00:00.000Z",
            "timestamp": "2026-12-01T09:00:01.000Z",
            "feedbackId": "0100018c-complaint-000001",
        },
        "mail": _ses_mail(message_id, email),
    }


def ses_bounce(message_id: str, email: str, *, bounce_type: str = "Permanent") -> dict[str, Any]:
    """An SES bounce event (configuration-set event publishing: ``eventType``)."""
    return {
        "eventType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bounceSubType": "General",
            "bouncedRecipients": [
                {
                    "emailAddress": email,
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                }
            ],
            "timestamp": "2026-12-01T09:00:01.000Z",
            "feedbackId": "0100018c-bounce-000001",
            "reportingMTA": "dsn; a8-70.smtp-out.amazonses.com",
        },
        "mail": _ses_mail(message_id, email),
    }


def ses_transient_bounce(message_id: str, email: str) -> dict[str, Any]:
    """An SES ``Bounce`` notification of ``bounceType`` Transient (a full mailbox)."""
    notification = ses_bounce(message_id, email, bounce_type="Transient")
    notification["bounce"]["bounceSubType"] = "MailboxFull"
    notification["bounce"]["bouncedRecipients"] = [{
        "emailAddress": email, "action": "failed", "status": "4.2.2",
        "diagnosticCode": "smtp; 452 4.2.2 The email account that you tried to reach is over quota",
    }]  # fmt: skip
    return notification


def ses_delivery(message_id: str, email: str) -> dict[str, Any]:
    """An SES delivery notification (``notificationType``)."""
    return {
        "notificationType": "Delivery",
        "mail": _ses_mail(message_id, email),
        "delivery": {
            "timestamp": "2026-12-01T09:00:01.000Z", "processingTimeMillis": 546,
            "recipients": [email], "smtpResponse": "250 ok:  Message 64111812 accepted",
            "remoteMtaIp": "127.0.2.0", "reportingMTA": "a8-70.smtp-out.amazonses.com",
        },
    }  # fmt: skip


def _ses_mail(message_id: str, email: str) -> dict[str, Any]:
    return {
        "timestamp": "2026-12-01T08:59:59.000Z",
        "source": "reminders@example.com",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/example.com",
        "sendingAccountId": "123456789012",
        "messageId": message_id,
        "destination": [email],
    }
