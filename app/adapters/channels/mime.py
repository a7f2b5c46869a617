"""The RFC 5322 form of a rendered email, shared by every provider that builds MIME."""

from __future__ import annotations

import hashlib
from datetime import datetime
from email.message import EmailMessage
from email.policy import EmailPolicy
from email.utils import format_datetime, parseaddr
from typing import Any, Literal

from app.domain.errors import PermanentProviderError
from app.domain.messages import RenderedMessage

DEFAULT_MESSAGE_ID_DOMAIN = "reminder-relay.local"
MAX_LINE = 78  # email.policy.default.max_line_length: longer lines are folded
# RFC 2369 list headers (and RFC 8058's companion) carry URLs that mail clients read
# literally: an RFC 2047 encoded word is not a URL, so these are never encoded, only folded
# at whitespace outside the angle brackets (a single long URL stays on one line).
URL_LIST_HEADERS = frozenset(
    {"list-unsubscribe", "list-unsubscribe-post", "list-help", "list-subscribe",
     "list-post", "list-owner", "list-archive"}
)  # fmt: skip


def fold_url_list(name: str, value: str, *, linesep: str) -> str | None:
    """The value of a URL-list header folded without encoding; None for any other header.

    Also None when the value is not plain ASCII: that is no URL list, and the ordinary
    encoding rules apply to it.
    """
    if name.lower() not in URL_LIST_HEADERS or not value.isascii():
        return None
    lines, current, depth = [], f"{name}: ", 0
    for position, char in enumerate(value):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char in " \t" and depth <= 0 and _next_word_overflows(current, value, position):
            lines.append(current)
            current = ""
        current += char
    lines.append(current)
    return linesep.join(lines)[len(name) + 2 :]


def _next_word_overflows(current: str, value: str, position: int) -> bool:
    # Fold before this whitespace when the word after it would not fit on the current line.
    rest = value[position + 1 :]
    word = rest.split(maxsplit=1)[0] if rest.strip() else ""
    return bool(current.strip(" \t")) and len(current) + 1 + len(word) > MAX_LINE


class _MailPolicy(EmailPolicy):
    """``email.policy.default`` that leaves URL-list headers unencoded (see above)."""

    def fold(self, name: str, value: Any) -> str:
        folded = fold_url_list(name, str(value), linesep=self.linesep)
        return super().fold(name, value) if folded is None else f"{name}: {folded}{self.linesep}"

    def fold_binary(self, name: str, value: Any) -> bytes:
        folded = fold_url_list(name, str(value), linesep=self.linesep)
        if folded is None:
            return super().fold_binary(name, value)
        return f"{name}: {folded}{self.linesep}".encode("ascii")


MAIL_POLICY = _MailPolicy()
SMTP_POLICY = MAIL_POLICY.clone(linesep="\r\n")  # what email.policy.SMTP is to the default
SMTPUTF8_POLICY = SMTP_POLICY.clone(utf8=True)  # headers in UTF-8, for SMTPUTF8 sessions


def message_id_for(idempotency_key: str, *, domain: str = DEFAULT_MESSAGE_ID_DOMAIN) -> str:
    """The Message-ID of a ledger key: the same on every attempt, so receivers can deduplicate."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]
    return f"<{digest}@{domain}>"


def sender_domain(sender: str) -> str:
    """The domain of a From address, or the default Message-ID domain."""
    _, address = parseaddr(sender)
    domain = address.rpartition("@")[2]
    return domain or DEFAULT_MESSAGE_ID_DOMAIN


def mail_date(now: datetime) -> str:
    """The RFC 5322 ``Date`` value of a moment (numeric zone, e.g. ``+0000``)."""
    return format_datetime(now)


def transfer_encoding(content: str) -> Literal["7bit", "quoted-printable"]:
    """How a text part travels: 7bit when it is ASCII in short lines, else quoted-printable.

    Why not 8bit for UTF-8: it is only allowed to servers that announce 8BITMIME, and a
    message is sometimes relayed onward to one that does not; quoted-printable is 7-bit clean
    everywhere and stays readable for mostly-Latin text.
    """
    lines = content.encode("utf-8").splitlines()
    fits = max((len(line) for line in lines), default=0) <= MAX_LINE
    return "7bit" if fits and content.isascii() else "quoted-printable"


def build_email(
    message: RenderedMessage, *, idempotency_key: str, sender: str, now: datetime
) -> EmailMessage:
    """The RFC 5322 message for a rendered email; its Message-ID is stable per ledger key."""
    email = EmailMessage(policy=MAIL_POLICY)
    email["From"] = sender
    email["To"] = message.recipient
    email["Subject"] = message.subject
    email["Date"] = mail_date(now)
    email["Message-ID"] = message_id_for(idempotency_key, domain=sender_domain(sender))
    for name, value in message.headers.items():
        email[name] = value
    email.set_content(message.text, cte=transfer_encoding(message.text))
    if message.html is not None:
        email.add_alternative(message.html, subtype="html", cte=transfer_encoding(message.html))
    return email


def require_email_recipient(message: RenderedMessage) -> None:
    """Refuse, permanently, an email whose customer has no address (every email provider)."""
    if not message.recipient:
        raise PermanentProviderError("customer has no email address", detail_class="no_recipient")
