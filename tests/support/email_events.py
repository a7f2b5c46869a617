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


def _ses_mail(message_id: str, email: str) -> dict[str, Any]:
    return {
        "timestamp": "2026-12-01T08:59:59.000Z",
        "source": "reminders@example.com",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/example.com",
        "sendingAccountId": "123456789012",
        "messageId": message_id,
        "destination": [email],
    }
