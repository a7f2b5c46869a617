"""Initial schema: customers, reminders, the send ledger and the dead-letter set.

Reviewed by hand: timestamps are plain ``timestamptz`` (the UTC handling lives in
app.db.types.UTCDateTime at run time), names follow the metadata naming convention.
Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30 08:28:58.505838
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "customers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("webhook_url", sa.String(length=2048), nullable=True),
        sa.Column("time_zone", sa.String(length=64), nullable=False),
        sa.Column("opted_out_channels", sa.JSON(), nullable=False),
        sa.Column("unsubscribed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_customers")),
    )
    op.create_table(
        "reminders",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("customer_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("channels", sa.JSON(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("schedule_version", sa.Integer(), nullable=False),
        sa.Column("sweep_claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("enqueued_message_ids", sa.JSON(), nullable=True),
        sa.Column("cancelled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"], ["customers.id"], name=op.f("fk_reminders_customer_id_customers")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reminders")),
    )
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reminders_customer_id"), ["customer_id"], unique=False)
        batch_op.create_index("ix_reminders_state_due_at", ["state", "due_at"], unique=False)

    op.create_table(
        "send_records",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("reminder_id", sa.String(length=200), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=24), nullable=False),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        sa.Column("attempt_budget_start", sa.Integer(), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=24), nullable=True),
        sa.Column("last_error_class", sa.String(length=64), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("provider_request_id", sa.String(length=255), nullable=True),
        sa.Column("idempotency_key", sa.String(length=400), nullable=False),
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("redrive_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["reminder_id"], ["reminders.id"], name=op.f("fk_send_records_reminder_id_reminders")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_send_records")),
        sa.UniqueConstraint(
            "reminder_id",
            "channel",
            "provider",
            name=op.f("uq_send_records_reminder_id_channel_provider"),
        ),
    )
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.create_index(
            "ix_send_records_state_lease_until", ["state", "lease_until"], unique=False
        )

    op.create_table(
        "dead_letters",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("send_record_id", sa.Integer(), nullable=True),
        sa.Column("queue", sa.String(length=200), nullable=False),
        sa.Column("message_id", sa.String(length=255), nullable=True),
        sa.Column("reminder_id", sa.String(length=200), nullable=True),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("error_class", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("redriven_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["send_record_id"],
            ["send_records.id"],
            name=op.f("fk_dead_letters_send_record_id_send_records"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letters")),
        sa.UniqueConstraint("queue", "message_id", name=op.f("uq_dead_letters_queue_message_id")),
    )
    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.create_index("ix_dead_letters_created_at", ["created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_dead_letters_send_record_id"), ["send_record_id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("dead_letters", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_dead_letters_send_record_id"))
        batch_op.drop_index("ix_dead_letters_created_at")

    op.drop_table("dead_letters")
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.drop_index("ix_send_records_state_lease_until")

    op.drop_table("send_records")
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.drop_index("ix_reminders_state_due_at")
        batch_op.drop_index(batch_op.f("ix_reminders_customer_id"))

    op.drop_table("reminders")
    op.drop_table("customers")
