"""The suppression list's rules: which addresses receive no email, and who may lift them.

An address is stored and compared in one normal form: the local part as given (RFC 5321
lets a receiving system treat it case-sensitively; providers report it as we sent it),
the domain part lower-cased (DNS names are case-insensitive). Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .errors import InvalidInput

MAX_ADDRESS_LENGTH = 320  # customers.email and suppressions.email
# The error class of a send the suppression list stopped (outcome ``suppressed``).
ADDRESS_SUPPRESSED = "address_suppressed"


class SuppressionReason(StrEnum):
    """Why an address receives no email."""

    HARD_BOUNCE = "hard_bounce"  # the provider reported a permanent bounce
    COMPLAINT = "complaint"  # the recipient marked a message as spam
    SOFT_BOUNCES = "soft_bounces"  # too many temporary bounces within the window
    SMTP_REJECTED = "smtp_rejected"  # our SMTP server answered 5xx to RCPT TO
    MANUAL = "manual"  # an operator put it on the list


# When an address is reported again, the stronger reason replaces the stored one: a
# complaint outranks a bounce because lifting it needs ``force`` (sending to someone who
# called us spam hurts the sender's reputation most).
_STRENGTH = {
    SuppressionReason.SOFT_BOUNCES: 0,
    SuppressionReason.SMTP_REJECTED: 1,
    SuppressionReason.HARD_BOUNCE: 2,
    SuppressionReason.MANUAL: 3,
    SuppressionReason.COMPLAINT: 4,
}


@dataclass(frozen=True, slots=True)
class Suppression:
    """One address on the list, and where that came from."""

    email: str  # normalized (``normalize_email``)
    reason: SuppressionReason
    source: str  # "resend", "sendgrid", "postmark", "ses", "smtp", "api", "cli", ...
    source_event_id: str | None = None
    detail: str | None = None  # the provider's or operator's words, truncated


def normalize_email(address: str) -> str:
    """The stored form of an address; ``InvalidInput`` when it is not ``local@domain``."""
    text = address.strip()
    local, at, domain = text.rpartition("@")
    if not at or not local or not domain or len(text) > MAX_ADDRESS_LENGTH:
        raise InvalidInput("email", "must be an address of the form local@domain")
    if any(char.isspace() or char == "\x00" for char in text):
        raise InvalidInput("email", "must not contain spaces or NUL")
    return f"{local}@{domain.lower()}"


def try_normalize(address: object) -> str | None:
    """``normalize_email`` for untrusted input (provider events): None when unusable."""
    if not isinstance(address, str):
        return None
    try:
        return normalize_email(address)
    except InvalidInput:
        return None


def replaces(new: SuppressionReason, old: SuppressionReason) -> bool:
    """True when a new report of ``new`` should overwrite a stored ``old`` reason."""
    return _STRENGTH[new] > _STRENGTH[old]


def may_lift(reason: SuppressionReason, *, force: bool) -> bool:
    """A complaint is lifted only with an explicit ``force``; everything else freely."""
    return force or reason != SuppressionReason.COMPLAINT
