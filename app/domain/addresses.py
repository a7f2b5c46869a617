"""Email addresses as SMTP can carry them (RFC 5321, RFC 5890 IDNA, RFC 6531 SMTPUTF8).

We store the address exactly as the customer gave it. At send time the domain is written in
ASCII (IDNA 2008 with UTS #46 mapping: ``bücher.de`` → ``xn--bcher-kva.de``), which every
server accepts; a local part that is not ASCII (``ü@example.com``) can only travel through a
server that offers SMTPUTF8 — elsewhere the send fails permanently (``recipient_unsupported``)
instead of retrying an address the server can never take.
"""

from __future__ import annotations

from dataclasses import dataclass

import idna

from app.domain.errors import PermanentProviderError

UNSUPPORTED = "recipient_unsupported"  # the error class of an address SMTP cannot carry


@dataclass(frozen=True, slots=True)
class SmtpAddress:
    """An address as the SMTP envelope carries it."""

    envelope: str  # local part as given, domain in ASCII (IDNA)
    needs_smtputf8: bool  # the local part is not ASCII


def ascii_domain(domain: str) -> str:
    """The domain in ASCII (A-labels); ValueError when IDNA cannot write it."""
    if domain.isascii():  # sent as given: punycode stays punycode
        return domain
    try:
        return idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError as error:
        raise ValueError(f"the domain {domain!r} is not a valid internationalised name") from error


def smtp_address(address: str) -> SmtpAddress:
    """How ``address`` goes on the envelope; PermanentProviderError when it cannot."""
    local, _, domain = address.rpartition("@")
    if not local or not domain:
        raise PermanentProviderError(
            f"{address!r} is not an email address", detail_class=UNSUPPORTED
        )
    try:
        envelope = f"{local}@{ascii_domain(domain)}"
    except ValueError as error:
        raise PermanentProviderError(str(error), detail_class=UNSUPPORTED) from None
    return SmtpAddress(envelope, needs_smtputf8=not local.isascii())


def smtputf8_note(address: str | None) -> str | None:
    """Why an address may not be deliverable (for previews), or None when any server takes it."""
    if not address or address.rpartition("@")[0].isascii():
        return None
    return (
        f"the local part of {address!r} is not ASCII: it is sent only through an SMTP server "
        f"that offers SMTPUTF8; anywhere else the send fails permanently ({UNSUPPORTED})"
    )
