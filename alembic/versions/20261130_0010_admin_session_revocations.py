"""Revoked admin sessions: a logout ends the session's cookie everywhere.

Rows are kept only until the cookie would have expired (pruned at each logout); the
index on expires_at serves that pruning.

Revision ID: 0010_admin_sessions
Revises: 0009_schedule_errors
Create Date: 2026-11-30 17:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_admin_sessions"
down_revision: str | None = "0009_schedule_errors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "admin_session_revocations",
        sa.Column("session_id", sa.String(length=32), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_admin_session_revocations"),
    )
    op.create_index(
        "ix_admin_session_revocations_expires_at", "admin_session_revocations", ["expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_admin_session_revocations_expires_at", table_name="admin_session_revocations")
    op.drop_table("admin_session_revocations")
