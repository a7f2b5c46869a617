"""Recurring schedules: the schedules table, reminders.schedule_id, customers' quiet hours.

Reviewed by hand: names follow the metadata naming convention. The (state,
materialized_through) index serves the sweep's pick of schedules to materialize;
reminders.schedule_id finds a schedule's occurrences (it has no foreign key so that this
branch adds a plain column to the shared reminders table; schedules are never deleted,
only marked deleted).

Revision ID: 0005
Revises: 0001
Create Date: 2026-11-30 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("customer_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("channels", sa.JSON(), nullable=False),
        sa.Column("rrule", sa.Text(), nullable=True),
        sa.Column("cron", sa.String(length=200), nullable=True),
        sa.Column("local_time", sa.String(length=5), nullable=True),
        sa.Column("time_zone", sa.String(length=64), nullable=True),
        sa.Column("offset_days", sa.Integer(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("materialized_through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("materialized_local", sa.String(length=16), nullable=True),
        sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["customer_id"], ["customers.id"], name=op.f("fk_schedules_customer_id_customers")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_schedules_customer_id"), ["customer_id"], unique=False)
        batch_op.create_index(
            "ix_schedules_state_materialized_through",
            ["state", "materialized_through"],
            unique=False,
        )
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.add_column(sa.Column("schedule_id", sa.String(length=200), nullable=True))
        batch_op.create_index(batch_op.f("ix_reminders_schedule_id"), ["schedule_id"], unique=False)
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("quiet_hours_start", sa.String(length=5), nullable=True))
        batch_op.add_column(sa.Column("quiet_hours_end", sa.String(length=5), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("customers", schema=None) as batch_op:
        batch_op.drop_column("quiet_hours_end")
        batch_op.drop_column("quiet_hours_start")
    with op.batch_alter_table("reminders", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reminders_schedule_id"))
        batch_op.drop_column("schedule_id")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index("ix_schedules_state_materialized_through")
        batch_op.drop_index(batch_op.f("ix_schedules_customer_id"))
    op.drop_table("schedules")
