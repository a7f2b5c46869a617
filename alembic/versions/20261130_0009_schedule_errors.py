"""Schedules that cannot be computed are marked broken: schedules.broken_at, broken_error.

A sweep skips a broken schedule (and says why) instead of failing for every customer; a
PUT that changes its plan, or a resume, clears the mark. The partial index serves the
admin page's and the metrics' "broken schedules" count without scanning active ones.

Revision ID: 0009_schedule_errors
Revises: 0009_import_progress
Create Date: 2026-11-30 17:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_schedule_errors"
down_revision: str | None = "0009_import_progress"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("broken_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("broken_error", sa.Text(), nullable=True))
    op.create_index("ix_schedules_broken_at", "schedules", ["broken_at"])


def downgrade() -> None:
    op.drop_index("ix_schedules_broken_at", table_name="schedules")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("broken_error")
        batch.drop_column("broken_at")
