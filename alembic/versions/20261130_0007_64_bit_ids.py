"""64-bit ids on the tables that gain a row per delivery and so grow without bound.

Tables: send_records, dead_letters, queue_messages. PostgreSQL: their primary keys and the
foreign key pointing at one become ``bigint`` in place, and so do the sequences behind them
(a sequence keeps its own type: an ``integer`` one stops at 2,147,483,647 whatever the
column says). SQLite: nothing to do, its INTEGER is already 64-bit.

Revision ID: 0007_ids64
Revises: 0006
Create Date: 2026-11-30 16:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_ids64"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column), the referencing column first so no constraint ever compares mixed widths
# for longer than one statement.
_COLUMNS = (
    ("dead_letters", "send_record_id"),
    ("send_records", "id"),
    ("dead_letters", "id"),
    ("queue_messages", "id"),
)
_SEQUENCES = (("send_records", "id"), ("dead_letters", "id"), ("queue_messages", "id"))


def _retype(to: sa.types.TypeEngine, sequence_type: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column in _COLUMNS:
        op.alter_column(table, column, type_=to)
    for table, column in _SEQUENCES:
        op.execute(f"ALTER SEQUENCE {_sequence_of(table, column)} AS {sequence_type}")


def _sequence_of(table: str, column: str) -> str:
    name = op.get_bind().scalar(sa.text(f"SELECT pg_get_serial_sequence('{table}', '{column}')"))
    assert name, f"{table}.{column} has no sequence"
    return str(name)


def upgrade() -> None:
    _retype(sa.BigInteger(), "bigint")


def downgrade() -> None:
    _retype(sa.Integer(), "integer")
