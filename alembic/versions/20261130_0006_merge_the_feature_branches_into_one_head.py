"""Merge the feature branches (embedded queue, channels, operations, schedules) into one head.

Revision ID: 0006
Revises: 0002, 0003, 0004, 0005
Create Date: 2026-11-30 09:45:30.924826
"""

from collections.abc import Sequence

revision: str = "0006"
down_revision: str | Sequence[str] | None = ("0002", "0003", "0004", "0005")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
