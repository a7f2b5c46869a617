"""Drop three indexes whose columns begin another index of the same table.

``ix_reminders_customer_id`` and ``ix_reminders_schedule_id`` (0001, 0005) are the first
column of ``ix_reminders_customer_id_due_at_id`` and ``ix_reminders_schedule_id_due_at_id``
(0014), and ``ix_schedules_customer_id`` of ``ix_schedules_customer_id_id``: every lookup
they served, the longer index serves as well, the foreign keys' checks included. They only
cost writes, and the reminders' twice per reminder: the sweep's change of ``state`` and
the finalize's are not HOT updates, so each wrote an entry into every index of the table.

Revision ID: 0019_no_redundant_indexes
Revises: 0018_queue_claim_order
Create Date: 2026-12-03 19:50:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019_no_redundant_indexes"
down_revision: str | None = "0018_queue_claim_order"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DROPPED = (
    ("reminders", "ix_reminders_customer_id", "customer_id"),
    ("reminders", "ix_reminders_schedule_id", "schedule_id"),
    ("schedules", "ix_schedules_customer_id", "customer_id"),
)


def upgrade() -> None:
    for table, name, _ in _DROPPED:
        op.drop_index(name, table_name=table)


def downgrade() -> None:
    for table, name, column in _DROPPED:
        op.create_index(name, table, [column])
