"""``eml.email_bytes`` writes the same message as ``mime.build_email``, only faster.

Both outputs are parsed back with ``email.policy.default`` and compared on what a mail
client sees: the headers, the MIME structure and every part's decoded content; the
unstructured headers (Subject, extras) must come back exactly as given.
"""

from __future__ import annotations

import email
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.channels.eml import email_bytes
from app.adapters.channels.mime import build_email
from app.domain.messages import RenderedMessage
from app.domain.unsubscribe import UnsubscribeLinks

NOW = datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
SENDERS = [
    "reminders@relay.example",
    "Reminder Relay <reminders@relay.example>",
    "Erinnerungsdienst Müller <erinnerung@relay.example>",
    '"Relay, Inc." <reminders@relay.example>',
]
# What the renderer produces: one line, whitespace runs collapsed.
single_line = st.text(st.characters(exclude_categories=["Cs", "Cc"])).map(
    lambda value: " ".join(value.split())
)
bodies = st.text(st.characters(exclude_categories=["Cs"]))
long_lines = st.text(st.sampled_from("aä €x "), min_size=70, max_size=300)


def seen_by_a_client(raw: bytes) -> dict:
    """What a parser makes of a message: headers, structure, decoded parts."""
    parsed = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    parts = [
        (part.get_content_type(), part.get_content_charset(), part.get_content())
        for part in parsed.walk()
        if not part.is_multipart()
    ]
    headers = {
        name: str(parsed[name])
        for name in ("From", "To", "Subject", "Date", "Message-ID", "MIME-Version", *EXTRA)
        if parsed[name] is not None
    }
    return {"type": parsed.get_content_type(), "headers": headers, "parts": parts}


EXTRA = ("List-Unsubscribe", "List-Unsubscribe-Post", "X-Reminder")


def both(message: RenderedMessage, sender: str, key: str = "r1:email:outbox") -> tuple:
    """The two serializations, as a client sees them."""
    fast = email_bytes(message, idempotency_key=key, sender=sender, now=NOW)
    reference = bytes(build_email(message, idempotency_key=key, sender=sender, now=NOW))
    return seen_by_a_client(fast), seen_by_a_client(reference)


@settings(max_examples=150, deadline=None)
@given(
    subject=single_line,
    text=bodies | long_lines,
    html=st.none() | bodies | long_lines,
    sender=st.sampled_from(SENDERS),
    recipient=st.emails(),
    extra=st.dictionaries(st.sampled_from(EXTRA), single_line.filter(bool), max_size=2),
)
def test_the_fast_serialization_parses_into_the_same_message(
    subject, text, html, sender, recipient, extra
):
    """For any subject, bodies, sender and extra headers, a client sees the same email."""
    message = RenderedMessage(
        "email", recipient, subject=subject, text=text, html=html, headers=extra
    )
    fast, reference = both(message, sender)
    # Unstructured values are compared with what was meant: the stdlib itself mangles some
    # (a word too long to fold comes back with a leading space).
    meant = {"Subject": subject, **extra}
    assert {name: fast["headers"].pop(name) for name in meant} == meant
    for name in meant:
        reference["headers"].pop(name)
    assert fast == reference


def test_a_digest_with_unicode_and_a_long_line_round_trips():
    """A typical digest: umlauts, a long URL line, an unsubscribe header."""
    text = "Hallo Jürgen,\n\nIhre Woche:\n  - " + "x" * 120 + "\n\nhttps://relay.example/u?t=abc\n"
    message = RenderedMessage(
        "email",
        "juergen@example.com",
        subject="Ihr Wochenrückblick für 2026-W49",
        text=text,
        html="<p>Hallo J&uuml;rgen</p>",
        headers={"List-Unsubscribe": "<https://relay.example/u?t=abc>"},
    )
    fast, reference = both(message, "Erinnerungsdienst <r@relay.example>")
    assert fast == reference
    assert fast["parts"][0][2] == text


def test_the_same_key_gives_the_same_bytes():
    """A resend at the same moment writes identical bytes (the boundary derives from the key)."""
    message = RenderedMessage("email", "a@example.com", subject="Hi", text="t", html="<p>h</p>")
    first = email_bytes(message, idempotency_key="k", sender="r@relay.example", now=NOW)
    assert first == email_bytes(message, idempotency_key="k", sender="r@relay.example", now=NOW)
    assert first != email_bytes(message, idempotency_key="k2", sender="r@relay.example", now=NOW)


@pytest.mark.parametrize("field", ["subject", "recipient", "header"])
def test_a_line_break_in_a_header_is_refused_like_the_stdlib_does(field):
    """CR or LF in any header value raises ValueError in both serializations."""
    values = {"subject": "ok", "recipient": "a@example.com", "headers": {}}
    if field == "header":
        values["headers"] = {"X-Reminder": "a\r\nBcc: victim@example.com"}
    else:
        values[field] = "a\nBcc: victim@example.com"
    message = RenderedMessage("email", text="t", **values)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        email_bytes(message, idempotency_key="k", sender="r@relay.example", now=NOW)
    with pytest.raises(ValueError):
        bytes(build_email(message, idempotency_key="k", sender="r@relay.example", now=NOW))


# A realistic one-click link: 100 characters, longer than a 78-character header line.
UNSUBSCRIBE_URL = UnsubscribeLinks("https://reminders.example-company.com", b"s" * 32).url_for(
    "cust_1842", "email"
)
UNSUBSCRIBE_URL += "?c=" + "x" * (100 - len(UNSUBSCRIBE_URL) - 3)


def test_a_long_unsubscribe_url_is_written_plain_not_rfc2047_encoded():
    """A 100-character List-Unsubscribe URL stays a literal ``<https://…>`` on one line."""
    assert len(UNSUBSCRIBE_URL) == 100
    headers = {
        "List-Unsubscribe": f"<{UNSUBSCRIBE_URL}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
    message = RenderedMessage("email", "a@example.com", subject="s", text="t", headers=headers)
    for raw in (
        email_bytes(message, idempotency_key="k", sender="r@relay.example", now=NOW),
        bytes(build_email(message, idempotency_key="k", sender="r@relay.example", now=NOW)),
    ):
        assert f"\nList-Unsubscribe: <{UNSUBSCRIBE_URL}>\n".encode() in raw
        assert b"\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\n" in raw
        assert b"=?" not in raw


def test_several_unsubscribe_urls_fold_between_items_only():
    """A list of URLs folds after a comma, never inside an angle-bracketed URL."""
    value = f"<mailto:unsubscribe@relay.example?subject=stop>, <{UNSUBSCRIBE_URL}>"
    message = RenderedMessage(
        "email", "a@example.com", subject="s", text="t", headers={"List-Unsubscribe": value}
    )
    expected = (
        f"\nList-Unsubscribe: <mailto:unsubscribe@relay.example?subject=stop>,\n"
        f" <{UNSUBSCRIBE_URL}>\n"
    ).encode()
    assert expected in email_bytes(message, idempotency_key="k", sender="r@relay.example", now=NOW)
    assert expected in bytes(
        build_email(message, idempotency_key="k", sender="r@relay.example", now=NOW)
    )
