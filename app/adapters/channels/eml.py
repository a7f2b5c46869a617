"""The RFC 5322 bytes of a rendered email, written directly instead of through EmailMessage.

Why: ``bytes(mime.build_email(...))`` costs ~1.5 ms of CPU per message on the 2-core box
(every header is parsed into a header object and folded again by the email policy); it
was the largest single cost of a delivery through the outbox (bench/push.py). Our emails
have one shape — a text body and an optional HTML alternative — so this module writes
that shape itself (~0.1 ms). It keeps ``build_email``'s headers (From, To, Subject, Date,
the stable Message-ID, the message's extra headers) and its body encoding rule
(``mime.transfer_encoding``: 7bit for short ASCII lines, else quoted-printable);
``tests/unit/test_eml.py`` checks with hypothesis that both parse into the same message.
The MIME boundary derives from the idempotency key, so a resend writes the same content
(only ``Date`` says when).
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from email import quoprimime
from email.header import Header
from email.utils import formataddr, parseaddr
from functools import lru_cache

from app.domain.messages import RenderedMessage

from .mime import (
    MAX_LINE,
    fold_url_list,
    mail_date,
    message_id_for,
    sender_domain,
    transfer_encoding,
)

_sender_domain = lru_cache(maxsize=8)(sender_domain)  # parsed once per configured sender
# The Date header counts whole seconds: formatted once per second (3.6 µs each otherwise).
_second_date = lru_cache(maxsize=4)(mail_date)


def email_bytes(
    message: RenderedMessage, *, idempotency_key: str, sender: str, now: datetime
) -> bytes:
    """The message as ``mime.build_email`` would serialize it (same headers and parts)."""
    headers = [
        ("From", _address(sender)),
        ("To", _address(message.recipient)),
        ("Subject", _unstructured("Subject", message.subject)),
        ("Date", _second_date(now.replace(microsecond=0))),
        ("Message-ID", message_id_for(idempotency_key, domain=_sender_domain(sender))),
        *((name, _unstructured(name, value)) for name, value in message.headers.items()),
        ("MIME-Version", "1.0"),
    ]
    text_part = _text_part("plain", message.text)
    if message.html is None:
        return _head(headers) + text_part
    html_part = _text_part("html", message.html)
    boundary = _boundary(idempotency_key, text_part + html_part)
    headers.append(("Content-Type", f'multipart/alternative; boundary="{boundary}"'))
    delimiter = f"\n--{boundary}\n".encode()
    # The newline before each delimiter belongs to the delimiter (RFC 2046), so every part
    # keeps its own final newline, as EmailMessage writes it.
    return (
        _head(headers) + delimiter + text_part + delimiter + html_part
        + f"\n--{boundary}--\n".encode()
    )  # fmt: skip


def _head(headers: list[tuple[str, str]]) -> bytes:
    return "".join(f"{name}: {value}\n" for name, value in headers).encode()


def _check(name: str, value: str) -> None:
    if "\r" in value or "\n" in value:  # the same refusal as EmailMessage: no header injection
        raise ValueError(f"Header values may not contain linefeed or carriage return ({name})")


def _unstructured(name: str, value: str) -> str:
    _check(name, value)
    if value.isascii() and len(name) + 2 + len(value) <= MAX_LINE:
        return value
    if (url_list := fold_url_list(name, value, linesep="\n")) is not None:
        return url_list
    # RFC 2047 encoded words for non-ASCII, folding for long values.
    return Header(value, "utf-8", header_name=name).encode(linesep="\n")


@lru_cache(maxsize=64)  # the sender is the same on every message
def _address(value: str) -> str:
    _check("address", value)
    if not any(mark in value for mark in '<("'):
        return value  # a bare address (the usual recipient): nothing to parse or encode
    name, address = parseaddr(value)
    # A display name may need RFC 2047 encoding; a bare address is written as it is.
    return formataddr((name, address), charset="utf-8") if name else value


def _text_part(subtype: str, content: str) -> bytes:
    body = b"\n".join(content.encode("utf-8").splitlines()) + b"\n"
    encoding = transfer_encoding(content)
    if encoding == "quoted-printable":
        body = quoprimime.body_encode(body.decode("latin-1"), MAX_LINE).encode("ascii")
    return (
        f'Content-Type: text/{subtype}; charset="utf-8"\nContent-Transfer-Encoding: {encoding}\n\n'
    ).encode() + body


def _boundary(idempotency_key: str, content: bytes) -> str:
    digest = int(hashlib.sha256(idempotency_key.encode()).hexdigest()[:16], 16)
    boundary, attempt = f"==============={digest:019d}==", 0
    while boundary.encode() in content:  # practically never; keep it unambiguous anyway
        attempt += 1
        boundary = f"==============={digest:019d}.{attempt}=="
    return boundary
