"""Delivery summary: a settled reminder says what its channels came to.

``reminders.delivery`` is set when a reminder settles ``done``: ``delivered`` (every channel
meant to go out was accepted by a provider), ``partially_delivered``, ``undelivered`` (none
accepted, at least one failed: dead letter, permanent failure, expired) or ``withheld``
(nothing sent on purpose: suppressed, opted out, channel withdrawn). Open and cancelled
reminders have none. Existing ``done`` reminders get theirs from their ledger rows here, by
the rule ``app/db/ledger_rules.delivery_summary`` applies from now on (written out as it
stands today: a migration must not change when the code does). A partial index serves the
list filtered by delivery in (due_at, id) order.

Revision ID: 0017_delivery_summary
Revises: 0015_send_attempts
Create Date: 2026-12-02 18:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_delivery_summary"
down_revision: str | None = "0015_send_attempts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_WITHHELD = (
    "(sr.state = 'terminal_failure' AND coalesce(sr.outcome, '') IN ('cancelled', 'suppressed'))"
)
_DELIVERED = "count(DISTINCT sr.channel) FILTER (WHERE sr.state = 'sent')"
_TRIED = (
    "count(DISTINCT sr.channel) FILTER (WHERE sr.state IN ('dead', 'sent', 'terminal_failure')"
    f" AND NOT {_WITHHELD})"
)
BACKFILL = f"""
UPDATE reminders SET delivery = (
    SELECT CASE
        WHEN {_TRIED} = {_DELIVERED}
            THEN CASE WHEN {_DELIVERED} > 0 THEN 'delivered' ELSE 'withheld' END
        WHEN {_DELIVERED} > 0 THEN 'partially_delivered'
        ELSE 'undelivered'
    END
    FROM send_records sr WHERE sr.reminder_id = reminders.id
)
WHERE state = 'done'
"""


def upgrade() -> None:
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delivery", sa.String(length=24), nullable=True))
        batch_op.create_index(
            "ix_reminders_delivery_due_at_id",
            ["delivery", "due_at", "id"],
            unique=False,
            sqlite_where=sa.text("delivery IS NOT NULL"),
            postgresql_where=sa.text("delivery IS NOT NULL"),
        )
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.drop_index("ix_reminders_delivery_due_at_id")
        batch_op.drop_column("delivery")
