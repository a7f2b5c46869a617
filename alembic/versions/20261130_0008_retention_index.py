"""Retention: finished reminders found by (state, updated_at), oldest first.

The purge reads one state at a time (``done``, then ``cancelled``) in last-change order and
stops at its batch size; without this index every batch would scan and sort every reminder.
The other purge lookups already have theirs: send_records by reminder (the unique key's
leading column), dead letters by reminder, by send record and by redriven_at.

Revision ID: 0008_retention
Revises: 0007_ids64
Create Date: 2026-11-30 16:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008_retention"
down_revision: str | None = "0007_ids64"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.create_index(
            "ix_reminders_state_updated_at", ["state", "updated_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.drop_index("ix_reminders_state_updated_at")
