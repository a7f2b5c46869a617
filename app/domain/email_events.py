"""Provider events after acceptance, in one vocabulary whatever the provider called them.

Each provider route (``app/adapters/email_events/``) turns its payload into
``ProviderEvent`` values; what an event does to the ledger and the suppression list is
decided here, once, for all of them. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from .suppression import SuppressionReason

MAX_DETAIL_LENGTH = 500


class EventKind(StrEnum):
    """What a provider reported about a message it had accepted."""

    DELIVERED = "delivered"  # the receiving server accepted it
    HARD_BOUNCE = "hard_bounce"  # permanent: the mailbox does not exist, the domain refuses
    SOFT_BOUNCE = "soft_bounce"  # temporary: mailbox full, greylisted, provider gave up
    COMPLAINT = "complaint"  # the recipient marked it as spam
    DEFERRED = "deferred"  # still being retried by the provider


class DeliveryStatus(StrEnum):
    """A send record's delivery status (``send_records.delivery_status``)."""

    DEFERRED = "deferred"
    DELIVERED = "delivered"
    BOUNCED = "bounced"
    COMPLAINED = "complained"


_STATUS = {
    EventKind.DELIVERED: DeliveryStatus.DELIVERED,
    EventKind.HARD_BOUNCE: DeliveryStatus.BOUNCED,
    EventKind.SOFT_BOUNCE: DeliveryStatus.BOUNCED,
    EventKind.COMPLAINT: DeliveryStatus.COMPLAINED,
    EventKind.DEFERRED: DeliveryStatus.DEFERRED,
}
# Events arrive out of order (a "deferred" retried by the provider after "delivered"): a
# status is replaced only by one at least as far along. A complaint comes after delivery.
_PROGRESS = {
    DeliveryStatus.DEFERRED: 0,
    DeliveryStatus.DELIVERED: 1,
    DeliveryStatus.BOUNCED: 2,
    DeliveryStatus.COMPLAINED: 3,
}


@dataclass(frozen=True, slots=True)
class ProviderEvent:
    """One event as a provider reported it, in our vocabulary."""

    provider: str  # resend | sendgrid | postmark | ses
    event_id: str  # unique per provider: the same id twice is the same event
    kind: EventKind
    occurred_at: datetime
    email: str | None  # normalized recipient, when the event names one
    message_id: str | None  # the provider's message id (our provider_request_id)
    detail: str | None = None  # the provider's reason (bounce type, SMTP answer), truncated


@dataclass(frozen=True, slots=True)
class SoftBounceRule:
    """Soft bounces suppress an address only when ``count`` arrive within ``window``."""

    count: int
    window: timedelta


def delivery_status(kind: EventKind) -> DeliveryStatus:
    """The send record's delivery status an event sets."""
    return _STATUS[kind]


def advances(new: DeliveryStatus, old: DeliveryStatus | None) -> bool:
    """True when ``new`` may replace the stored status ``old`` (never a step back)."""
    return old is None or _PROGRESS[new] >= _PROGRESS[old]


def suppression_reason(kind: EventKind) -> SuppressionReason | None:
    """The suppression an event causes at once (soft bounces: see ``soft_bounce_suppresses``)."""
    if kind == EventKind.HARD_BOUNCE:
        return SuppressionReason.HARD_BOUNCE
    if kind == EventKind.COMPLAINT:
        return SuppressionReason.COMPLAINT
    return None


def soft_bounce_suppresses(recent: int, rule: SoftBounceRule) -> bool:
    """``recent`` soft bounces of an address within the window (this one included)."""
    return rule.count > 0 and recent >= rule.count


def clip(text: object, limit: int = MAX_DETAIL_LENGTH) -> str | None:
    """A provider's free text, bounded and single-line, or None."""
    if text is None:
        return None
    flat = " ".join(str(text).split())
    return flat[:limit] or None
