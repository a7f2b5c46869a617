"""The one mapping from ledger rows to domain views, for both implementations.

SQLAlchemy rows come in as ``row._mapping``, asyncpg records as they are: both are read by
column name. The send context's columns are named the same in both reads (the reminder's
state as ``reminder_state``); only JSON differs: asyncpg hands ``json`` columns over as
text, SQLAlchemy already decoded, so each caller passes its ``decode``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from app.domain.failover import FAILED_OVER
from app.domain.ledger import ProviderRow, SendRecordView
from app.domain.messages import CustomerView, ReminderView
from app.domain.states import SendState

# The columns of a SendRecordView, in this order wherever a statement returns one.
VIEW_COLUMNS = (
    "id",
    "state",
    "attempt_count",
    "attempt_budget_start",
    "lease_until",
    "next_attempt_at",
)


class Row(Protocol):
    """A row read by column name: SQLAlchemy's ``row._mapping`` or an asyncpg record."""

    def __getitem__(self, name: str, /) -> Any: ...


def send_record_view(row: Row) -> SendRecordView:
    """The receiver's view of one ``send_records`` row."""
    return SendRecordView(
        id=row["id"],
        state=SendState(row["state"]),
        attempt_count=row["attempt_count"],
        attempt_budget_start=row["attempt_budget_start"],
        lease_until=row["lease_until"],
        next_attempt_at=row["next_attempt_at"],
    )


def provider_row(row: Row) -> ProviderRow:
    """One provider's row of a (reminder, channel), as failover reads it."""
    return ProviderRow(send_record_view(row), handed_over=row["outcome"] == FAILED_OVER)


def decoded(value: Any) -> Any:
    """A JSON column as SQLAlchemy reads it: already decoded."""
    return value


def send_context(
    reminder_id: str, row: Row, *, decode: Callable[[Any], Any] = decoded
) -> tuple[ReminderView, CustomerView]:
    """The reminder and its customer from one joined row."""
    reminder = ReminderView(
        id=reminder_id,
        customer_id=row["customer_id"],
        kind=row["kind"],
        state=row["reminder_state"],
        due_at=row["due_at"],
        expires_at=row["expires_at"],
        channels=tuple(decode(row["channels"]) or ()),
        data=decode(row["data"]) or {},
        schedule_version=row["schedule_version"],
    )
    customer = CustomerView(
        id=row["customer_id"],
        email=row["email"],
        webhook_url=row["webhook_url"],
        time_zone=row["time_zone"],
        opted_out_channels=frozenset(decode(row["opted_out_channels"]) or ()),
        unsubscribed_at=row["unsubscribed_at"],
        webhook_disabled_at=row["webhook_disabled_at"],
    )
    return reminder, customer
