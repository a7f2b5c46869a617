"""The receiver's two uses of the suppression list: ask before an email is sent, and add
the address our own SMTP server refused at ``RCPT TO``."""

from __future__ import annotations

import logging

from app.adapters.channels.smtp import RECIPIENT_REFUSED
from app.domain.errors import LedgerUnavailable, ProviderError
from app.domain.messages import CustomerView
from app.domain.suppression import Suppression, SuppressionReason, try_normalize

from .receive_model import Receiver

log = logging.getLogger("reminders.receiver")


async def address_suppressed(receiver: Receiver, channel: str, customer: CustomerView) -> bool:
    """True when this email would go to an address on the suppression list."""
    if channel != "email" or receiver.suppressions is None:
        return False
    email = try_normalize(customer.email)
    return email is not None and await receiver.suppressions.reason_for(email) is not None


async def suppress_refused_recipient(
    receiver: Receiver, customer: CustomerView, error: ProviderError
) -> None:
    """Our SMTP server answered 5xx to ``RCPT TO``: no later email goes to that address."""
    email = try_normalize(customer.email)
    if error.detail_class != RECIPIENT_REFUSED or email is None or receiver.suppressions is None:
        return
    entry = Suppression(
        email, SuppressionReason.SMTP_REJECTED, source="smtp", detail=str(error)[:500]
    )
    try:
        await receiver.suppressions.suppress(entry, now=receiver.clock())
    except LedgerUnavailable:
        # The send is already final; the next send to the address is refused again at
        # RCPT and suppresses it then.
        log.warning("could not suppress a refused recipient: the database is unavailable")
