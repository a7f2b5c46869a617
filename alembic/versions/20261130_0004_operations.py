"""Operations: indexes for the dead-letter console, the admin page and /metrics.

- send_records(updated_at): the admin page counts outcomes over the last hour/day/week.
- dead_letters(reminder_id): a reminder lookup lists every dead letter it produced.
- dead_letters(redriven_at, created_at): the open set (redriven_at IS NULL), oldest first,
  read by the console, the admin groups and the dead-letter gauges on every scrape.

Revision ID: 0004
Revises: 0001
Create Date: 2026-11-30 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.create_index("ix_send_records_updated_at", ["updated_at"], unique=False)
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.create_index("ix_dead_letters_reminder_id", ["reminder_id"], unique=False)
        batch_op.create_index(
            "ix_dead_letters_redriven_at_created_at", ["redriven_at", "created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.drop_index("ix_dead_letters_redriven_at_created_at")
        batch_op.drop_index("ix_dead_letters_reminder_id")
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.drop_index("ix_send_records_updated_at")
