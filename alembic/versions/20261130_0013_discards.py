"""Discarded dead letters: an operator closes a quarantined letter that can never be redriven.

``discarded_at`` takes the letter out of the open set (the dead-letter gauge, the admin
page, redrive by filter) without deleting it; retention deletes it later, like a redriven
one, by the discard time (hence its index). The admin page also finds reminders by their
customer's email: ``customers.email`` gets an index.

Revision ID: 0013_discards
Revises: 0011_recipient_unsubscribes
Create Date: 2026-11-30 19:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_discards"
down_revision: str | None = "0011_recipient_unsubscribes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("discarded_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_dead_letters_discarded_at", ["discarded_at"], unique=False)
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.create_index("ix_customers_email", ["email"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.drop_index("ix_customers_email")
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.drop_index("ix_dead_letters_discarded_at")
        batch_op.drop_column("discarded_at")
