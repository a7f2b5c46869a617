"""The embedded queue's claim reads its messages in order from one index.

A dispatcher claims the due messages ``ORDER BY visible_at, id LIMIT batch``. The index on
(state, visible_at) gave the first key only, and the messages of one sweep batch share
their ``visible_at`` (thousands of them), so every claim sorted all of them (or the whole
ready set, when PostgreSQL had no statistics yet) to take 64: 4-6 ms of PostgreSQL CPU per
claim of 64 at 20,000 waiting. With ``id`` in the index the claim reads its 64 entries
and stops.

Revision ID: 0018_queue_claim_order
Revises: 0017_delivery_summary
Create Date: 2026-12-03 16:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018_queue_claim_order"
down_revision: str | None = "0017_delivery_summary"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_queue_messages_state_visible_at_id", "queue_messages", ["state", "visible_at", "id"]
    )
    op.drop_index("ix_queue_messages_state_visible_at", table_name="queue_messages")


def downgrade() -> None:
    op.create_index("ix_queue_messages_state_visible_at", "queue_messages", ["state", "visible_at"])
    op.drop_index("ix_queue_messages_state_visible_at_id", table_name="queue_messages")
