"""Build ledger states row by row, healthy or broken, for the audit's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.queue_tables import queue_messages
from app.db.tables import customers, dead_letters, reminders, send_records

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


async def add_customer(engine: AsyncEngine, customer_id: str = "cust-1") -> None:
    """One customer with an email address."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(
                id=customer_id, email="a@example.com", time_zone="UTC", created_at=NOW,
                updated_at=NOW,
            )
        )  # fmt: skip


async def add_reminder(
    engine: AsyncEngine, rid: str, *, state: str = "enqueued", due_at: datetime = NOW,
    channels: tuple[str, ...] = ("email", "webhook"),
) -> None:  # fmt: skip
    """One reminder row."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(reminders).values(
                id=rid, customer_id="cust-1", kind="renewal", due_at=due_at,
                channels=list(channels), data={}, state=state, schedule_version=1,
                created_at=NOW, updated_at=NOW,
            )
        )  # fmt: skip


async def add_send(
    engine: AsyncEngine, rid: str, channel: str, state: str, *, provider: str = "outbox",
    lease_until: datetime | None = None, next_attempt_at: datetime | None = None,
) -> int:  # fmt: skip
    """One ledger row; its id."""
    async with engine.begin() as conn:
        result = await conn.execute(
            insert(send_records).values(
                reminder_id=rid, channel=channel, provider=provider, state=state,
                attempt_count=1, attempt_budget_start=0, lease_until=lease_until,
                next_attempt_at=next_attempt_at, idempotency_key=f"{rid}:{channel}",
                redrive_count=0, created_at=NOW, updated_at=NOW,
            ).returning(send_records.c.id)
        )  # fmt: skip
        return int(result.scalar_one())


async def add_dead_letter(
    engine: AsyncEngine, message_id: str, *, send_record_id: int | None = None
) -> None:
    """One open dead letter."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(dead_letters).values(
                queue="reminders", message_id=message_id, send_record_id=send_record_id,
                reason="attempts_exhausted", attempts=3, created_at=NOW,
            )
        )  # fmt: skip


async def add_dead_message(engine: AsyncEngine, message_id: str, rid: str, channel: str) -> None:
    """A message in the embedded queue's dead list."""
    payload = {"v": 1, "reminder_id": rid, "channel": channel, "schedule_version": 1}
    async with engine.begin() as conn:
        await conn.execute(
            insert(queue_messages).values(
                queue="reminders", message_id=message_id, payload=payload,
                idempotency_key=f"{rid}:{channel}:v1", state="dead", visible_at=NOW,
                attempts=17, max_retries=16, created_at=NOW, expires_at=NOW + 30 * 24 * HOUR,
                dead_at=NOW,
            )
        )  # fmt: skip


async def seed_enqueued(
    engine: AsyncEngine, count: int, *, channels: tuple[str, ...], **customer: object
) -> list[str]:
    """A customer (``cust-1``, with ``customer`` fields) and ``count`` enqueued reminders
    due now on ``channels``; their ids."""
    ids = [f"rem-{index}" for index in range(count)]
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(
                id="cust-1", time_zone="UTC", created_at=NOW, updated_at=NOW, **customer
            )
        )
        await conn.execute(
            insert(reminders),
            [
                dict(
                    id=rid, customer_id="cust-1", kind="renewal", due_at=NOW,
                    channels=list(channels), data={}, state="enqueued", schedule_version=1,
                    created_at=NOW, updated_at=NOW,
                )
                for rid in ids
            ],
        )  # fmt: skip
    return ids
