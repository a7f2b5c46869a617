"""Room on each page of send_attempts for its row's one update (PostgreSQL).

An attempt row is inserted when its send is claimed and updated once, when the attempt
ends (its outcome). No indexed column changes, so the update could stay on the row's page
(a HOT update, no new index entries), but the page had filled with the next claims'
attempts by then: every outcome wrote a new entry in each of the table's three indexes.
Pages filled to 40% leave room for each row's second version (the version with its
outcome is ~20 bytes longer: at 50%, one update of a page's ~25 still moved). Measured on
PostgreSQL 15, 102,400 rows claimed and ended in batches of 64, a commit per batch: every
update HOT against 10 of them, 1.24 s against 2.88 s, heap 22% larger (3,939 pages against
3,228; each row has its two versions either way until vacuum) and the primary key and
``claimed_at`` indexes 40% smaller. Pages written before keep their layout.

Revision ID: 0021_attempts_fillfactor
Revises: 0020_ledger_readings
Create Date: 2026-12-07 11:10:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021_attempts_fillfactor"
down_revision: str | None = "0020_ledger_readings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE send_attempts SET (fillfactor = 40)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE send_attempts RESET (fillfactor)")
