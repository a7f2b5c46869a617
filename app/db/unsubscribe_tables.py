"""What recipients did through unsubscribe links (migration 0011), kept apart from customers.

``customers.opted_out_channels`` is what delivery obeys and what the application writes;
a row here is the recipient's own decision for one channel, with when and how. It
survives every customer PUT (the service adds its channel back to the opt-outs) and only
an explicit re-subscribe through the API deletes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import ForeignKey, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base


class RecipientUnsubscribe(Base):
    """One recipient's unsubscribe from one channel."""

    __tablename__ = "recipient_unsubscribes"

    customer_id: Mapped[str] = mapped_column(ForeignKey("customers.id"), primary_key=True)
    channel: Mapped[str] = mapped_column(String(32), primary_key=True)
    unsubscribed_at: Mapped[datetime]
    # How the recipient did it, e.g. "unsubscribe_link" (POST /unsubscribe/{token}: a mail
    # client's one-click request or the confirmation page's button).
    method: Mapped[str] = mapped_column(String(32))


recipient_unsubscribes = cast(Table, RecipientUnsubscribe.__table__)
