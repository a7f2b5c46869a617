"""Every built-in template's email, as SMTP sends it and as the outbox writes it, is a
standards-conforming message: parsed with ``email.policy.strict`` (any defect raises) it has
``Date`` (RFC 5322), a ``Message-ID`` on the configured sender's domain, ``MIME-Version``,
and 7-bit-clean transfer encodings even for non-ASCII subjects and bodies.
"""

from __future__ import annotations

import email
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest

from app.adapters.channels.mime import message_id_for
from app.adapters.channels.outbox import OutboxProvider
from app.adapters.channels.smtp import SmtpProvider
from app.adapters.rendering import Renderer
from app.domain.messages import CustomerView, ReminderView, RenderedMessage
from app.domain.unsubscribe import UnsubscribeLinks
from tests.support.channel_servers import smtp_server

pytestmark = pytest.mark.anyio

SENDER = "Erinnerungsdienst Müller <erinnerung@relay.example>"
NOW = datetime(2026, 12, 2, 10, 30, 15, tzinfo=UTC)
RENDERER = Renderer(unsubscribe_links=UnsubscribeLinks("https://relay.example/", b"s" * 32))
CUSTOMER = CustomerView("cust_1", "juergen@example.com", None, "Europe/Berlin", frozenset(), None)
# Non-ASCII in every field a template may show, and a line longer than 78 characters.
DATA = {
    "name": "Jürgen Größe",
    "week": "2026-W49 — Rückblick",
    "items": ["Grüße aus Köln €", "x" * 120],
    "item": "Zugang für Büro",
    "plan": "Jahresabo « Plus »",
}


def rendered(kind: str) -> RenderedMessage:
    """A built-in kind rendered with non-ASCII data for every field it reads."""
    due = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    reminder = ReminderView(f"r:{kind}", "cust_1", kind, "enqueued", due, None, ("email",), DATA, 1)
    return RENDERER.render(reminder, CUSTOMER, "email")


def check_standard_message(raw: bytes, message: RenderedMessage, key: str) -> None:
    """Parse strictly and check each header RFC 5322 / MIME ask for."""
    assert raw.isascii(), "non-ASCII bytes need an 8BITMIME server: encode them"
    parsed = email.message_from_bytes(raw, policy=policy.strict)
    assert isinstance(parsed, EmailMessage)
    assert parsedate_to_datetime(str(parsed["Date"])) == NOW
    assert str(parsed["Message-ID"]) == message_id_for(key, domain="relay.example")
    assert str(parsed["MIME-Version"]) == "1.0"
    assert str(parsed["Subject"]) == message.subject
    assert parsed["From"].addresses[0].display_name == "Erinnerungsdienst Müller"
    leaves = [part for part in parsed.walk() if not part.is_multipart()]
    expected = [message.text] + ([message.html] if message.html is not None else [])
    assert len(leaves) == len(expected)
    for part, content in zip(leaves, expected, strict=True):
        assert part["Content-Transfer-Encoding"] in ("7bit", "quoted-printable", "base64")
        assert part.get_content_charset() == "utf-8"
        assert part.get_content().replace("\r\n", "\n") == content.rstrip("\n") + "\n"
    assert all(not part.defects for part in parsed.walk())


KINDS = RENDERER.kinds()


def test_every_built_in_kind_is_covered():
    """The three kinds shipped in app/templates are all checked below."""
    assert {"weekly_digest", "expiry", "renewal"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_outbox_writes_a_standard_message(kind: str, tmp_path: Path):
    """The .eml the outbox writes parses strictly with every required header."""
    message = rendered(kind)
    key = f"r:{kind}:email:outbox"
    provider = OutboxProvider(tmp_path, fsync=False, sender=SENDER, clock=lambda: NOW)
    result = await provider.send(message, idempotency_key=key, timeout=5)
    assert result.provider_request_id is not None
    check_standard_message((tmp_path / result.provider_request_id).read_bytes(), message, key)


@pytest.mark.parametrize("kind", KINDS)
async def test_smtp_sends_a_standard_message(kind: str):
    """The DATA an SMTP server receives parses strictly with every required header."""
    message = rendered(kind)
    key = f"r:{kind}:email:smtp"
    with smtp_server() as server:
        provider = SmtpProvider(
            host=server.host, port=server.port, sender=SENDER, security="none", clock=lambda: NOW
        )
        await provider.send(message, idempotency_key=key, timeout=5)
    (raw,) = server.handler.raw
    check_standard_message(raw, message, key)
