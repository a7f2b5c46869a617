"""send_attempts: one append-only row per claim of a send record (issue 19).

Who claimed, when, under which lease, whether the provider deduplicates, and (written once
at the end) whether the provider was called and the outcome. The audit reads it for sends
whose provider may have accepted twice and for reclaims of attempts that never recorded an
outcome; the admin page shows it as a send's history.

Revision ID: 0015_send_attempts
Revises: 0016_deliverability
Create Date: 2026-12-02 11:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_send_attempts"
down_revision: str | None = "0016_deliverability"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "send_attempts",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column(
            "send_record_id",
            _ID,
            sa.ForeignKey(
                "send_records.id",
                name="fk_send_attempts_send_record_id_send_records",
                ondelete="CASCADE",
            ),
            nullable=False,
        ),
        sa.Column("reminder_id", sa.String(200), nullable=False),
        sa.Column("channel", sa.String(32), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(200), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("provider_deduplicates", sa.Boolean(), nullable=False),
        sa.Column("provider_called", sa.Boolean(), nullable=True),
        sa.Column("outcome", sa.String(40), nullable=True),
        sa.Column("error_class", sa.String(64), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_send_attempts"),
        sa.UniqueConstraint(
            "send_record_id", "attempt", name="uq_send_attempts_send_record_id_attempt"
        ),
    )
    op.create_index("ix_send_attempts_claimed_at", "send_attempts", ["claimed_at"])


def downgrade() -> None:
    op.drop_index("ix_send_attempts_claimed_at", table_name="send_attempts")
    op.drop_table("send_attempts")
