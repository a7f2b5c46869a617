"""The shared ledger reading: one process reads the ledger for /metrics, the others adopt it.

Before, every process of every replica read the gauges and ran the audit itself, each
reading seconds of database work on a large ledger. The table holds one row: the last
snapshot, when the next reading is due, and the lease of the process taking it.

Revision ID: 0020_ledger_readings
Revises: 0019_no_redundant_indexes
Create Date: 2026-12-07 04:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_ledger_readings"
down_revision: str | None = "0019_no_redundant_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INSTANT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "ledger_readings",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("reader", sa.String(length=64), nullable=True),
        sa.Column("claimed_until", _INSTANT, nullable=True),
        sa.Column("taken_at", _INSTANT, nullable=True),
        sa.Column("next_at", _INSTANT, nullable=True),
        sa.Column("snapshot", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_readings")),
    )


def downgrade() -> None:
    op.drop_table("ledger_readings")
