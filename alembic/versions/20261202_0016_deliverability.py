"""Deliverability: the suppression list, provider events, and each send's delivery status.

``suppressions`` holds normalized addresses that receive no email; ``email_events`` keeps
each provider event once (the intake is idempotent on (provider, event_id)); send records
gain the delivery status the events report, and an index on the provider's message id the
events name them by.

Revision ID: 0016_deliverability
Revises: 0014_listing
Create Date: 2026-12-02 11:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_deliverability"
down_revision: str | None = "0014_listing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_INSTANT = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "suppressions",
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("source_event_id", sa.String(length=255), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("created_at", _INSTANT, nullable=False),
        sa.Column("updated_at", _INSTANT, nullable=False),
        sa.PrimaryKeyConstraint("email", name="pk_suppressions"),
    )
    op.create_index("ix_suppressions_reason_email", "suppressions", ["reason", "email"])
    op.create_table(
        "email_events",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("event_id", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("provider_message_id", sa.String(length=255), nullable=True),
        sa.Column("send_record_id", _BIG_ID, nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("occurred_at", _INSTANT, nullable=False),
        sa.Column("received_at", _INSTANT, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_email_events"),
        sa.UniqueConstraint("provider", "event_id", name="uq_email_events_provider_event_id"),
    )
    op.create_index(
        "ix_email_events_email_kind_occurred_at", "email_events", ["email", "kind", "occurred_at"]
    )
    op.create_index("ix_email_events_received_at", "email_events", ["received_at"])
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.add_column(sa.Column("delivery_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("delivery_status_at", _INSTANT, nullable=True))
        batch_op.add_column(sa.Column("delivery_detail", sa.Text(), nullable=True))
        batch_op.create_index("ix_send_records_provider_request_id", ["provider_request_id"])


def downgrade() -> None:
    with op.batch_alter_table("send_records", schema=None) as batch_op:
        batch_op.drop_index("ix_send_records_provider_request_id")
        batch_op.drop_column("delivery_detail")
        batch_op.drop_column("delivery_status_at")
        batch_op.drop_column("delivery_status")
    op.drop_index("ix_email_events_received_at", table_name="email_events")
    op.drop_index("ix_email_events_email_kind_occurred_at", table_name="email_events")
    op.drop_table("email_events")
    op.drop_index("ix_suppressions_reason_email", table_name="suppressions")
    op.drop_table("suppressions")
