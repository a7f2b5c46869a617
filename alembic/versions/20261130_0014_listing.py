"""Lists: reminders in (due_at, id) order, whole or per customer or schedule; schedules of
a customer in id order.

``GET /v1/reminders`` pages by the keyset (due_at, id): each index below serves one filter
with rows already in that order, so a page reads ``limit`` index entries after the cursor
instead of sorting every matching reminder. A state filter uses ix_reminders_state_due_at.

Revision ID: 0014_listing
Revises: 0013_discards
Create Date: 2026-11-30 19:50:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014_listing"
down_revision: str | None = "0013_discards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_REMINDER_INDEXES = {
    "ix_reminders_due_at_id": ["due_at", "id"],
    "ix_reminders_customer_id_due_at_id": ["customer_id", "due_at", "id"],
    "ix_reminders_schedule_id_due_at_id": ["schedule_id", "due_at", "id"],
}


def upgrade() -> None:
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        for name, columns in _REMINDER_INDEXES.items():
            batch_op.create_index(name, columns, unique=False)
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index("ix_schedules_customer_id_id", ["customer_id", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index("ix_schedules_customer_id_id")
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        for name in reversed(_REMINDER_INDEXES):
            batch_op.drop_index(name)
