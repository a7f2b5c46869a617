"""Embedded queue: queue_messages and queue_idempotency_keys.

Reviewed by hand: names follow the metadata naming convention; the (state, visible_at)
index serves the dispatcher's claim, published_at the dedup-window cleanup.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "queue_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("queue", sa.String(length=200), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=400), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("visible_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queue_messages")),
        sa.UniqueConstraint("message_id", name=op.f("uq_queue_messages_message_id")),
    )
    with op.batch_alter_table("queue_messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_queue_messages_state_visible_at", ["state", "visible_at"], unique=False
        )

    op.create_table(
        "queue_idempotency_keys",
        sa.Column("queue", sa.String(length=200), nullable=False),
        sa.Column("idempotency_key", sa.String(length=400), nullable=False),
        sa.Column("message_id", sa.String(length=64), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("queue", "idempotency_key", name=op.f("pk_queue_idempotency_keys")),
    )
    with op.batch_alter_table("queue_idempotency_keys", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_queue_idempotency_keys_published_at"), ["published_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("queue_idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_queue_idempotency_keys_published_at"))
    op.drop_table("queue_idempotency_keys")
    with op.batch_alter_table("queue_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_queue_messages_state_visible_at")
    op.drop_table("queue_messages")
