"""Recipients' own unsubscribes, kept apart from the customer record the application writes.

Existing opt-outs cannot be told apart (an application's or a recipient's), so no rows are
backfilled: from this release on, every unsubscribe through a link is recorded here.

Revision ID: 0011_recipient_unsubscribes
Revises: 0010_admin_sessions
Create Date: 2026-11-30 17:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_recipient_unsubscribes"
down_revision: str | None = "0010_admin_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "recipient_unsubscribes",
        sa.Column("customer_id", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("unsubscribed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"],
            ["customers.id"],
            name="fk_recipient_unsubscribes_customer_id_customers",
        ),
        sa.PrimaryKeyConstraint("customer_id", "channel", name="pk_recipient_unsubscribes"),
    )


def downgrade() -> None:
    op.drop_table("recipient_unsubscribes")
