"""The RFC 5322 form of a rendered email, shared by every provider that builds MIME."""

from __future__ import annotations

import hashlib
from email.message import EmailMessage
from email.utils import parseaddr

from app.domain.messages import RenderedMessage

DEFAULT_MESSAGE_ID_DOMAIN = "reminder-relay.local"


def message_id_for(idempotency_key: str, *, domain: str = DEFAULT_MESSAGE_ID_DOMAIN) -> str:
    """The Message-ID of a ledger key: the same on every attempt, so receivers can deduplicate."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return f"<{digest}@{domain}>"


def sender_domain(sender: str) -> str:
    """The domain of a From address, or the default Message-ID domain."""
    _, address = parseaddr(sender)
    domain = address.rpartition("@")[2]
    return domain or DEFAULT_MESSAGE_ID_DOMAIN


def build_email(message: RenderedMessage, *, idempotency_key: str, sender: str) -> EmailMessage:
    """The RFC 5322 message for a rendered email; its Message-ID is stable per ledger key."""
    email = EmailMessage()
    email["From"] = sender
    email["To"] = message.recipient
    email["Subject"] = message.subject
    email["Message-ID"] = message_id_for(idempotency_key, domain=sender_domain(sender))
    for name, value in message.headers.items():
        email[name] = value
    email.set_content(message.text)
    if message.html is not None:
        email.add_alternative(message.html, subtype="html")
    return email
