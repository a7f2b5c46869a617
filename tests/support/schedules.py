"""Drive recurring schedules through HTTP, and a queue that pushes messages when they are due."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.memory.publisher import MemoryPublisher, PublishedMessage
from app.db.tables import reminders, send_records
from tests.support.clock import FakeClock
from tests.support.flow import API, push_message, sweep
from tests.support.providers import ScriptedProvider


async def put_schedule(
    client: httpx.AsyncClient, schedule_id: str, *, expect: int | None = None, **body: Any
) -> dict:
    """Register or change a schedule; asserts the status when ``expect`` is given."""
    body = {"kind": "weekly_digest", "channels": ["email"], **body}
    for name in ("starts_at", "ends_at"):
        if isinstance(body.get(name), datetime):
            body[name] = body[name].isoformat()
    response = await client.put(f"/v1/schedules/{schedule_id}", json=body, headers=API)
    if expect is not None:
        assert response.status_code == expect, response.text
    else:
        assert response.status_code in (200, 201), response.text
    return response.json()


async def schedule_action(client: httpx.AsyncClient, schedule_id: str, action: str) -> dict:
    """POST pause/resume, or DELETE with action="delete"."""
    if action == "delete":
        response = await client.delete(f"/v1/schedules/{schedule_id}", headers=API)
    else:
        response = await client.post(f"/v1/schedules/{schedule_id}/{action}", headers=API)
    assert response.status_code == 200, response.text
    return response.json()


async def occurrence_rows(engine: AsyncEngine, schedule_id: str | None = None) -> list[dict]:
    """Reminder rows materialized from schedules (one schedule's, or all), by due time."""
    stmt = select(reminders).where(reminders.c.schedule_id.is_not(None))
    if schedule_id is not None:
        stmt = stmt.where(reminders.c.schedule_id == schedule_id)
    async with engine.connect() as conn:
        rows = await conn.execute(stmt.order_by(reminders.c.due_at, reminders.c.id))
        return [dict(row._mapping) for row in rows]


async def ledger_by_reminder(engine: AsyncEngine) -> dict[str, list[dict]]:
    """Every send record, grouped by reminder id."""
    grouped: dict[str, list[dict]] = {}
    async with engine.connect() as conn:
        for row in await conn.execute(select(send_records).order_by(send_records.c.id)):
            grouped.setdefault(row.reminder_id, []).append(dict(row._mapping))
    return grouped


def provider_sends(provider: ScriptedProvider) -> Counter[str]:
    """How often the provider was called per reminder id."""
    return Counter(call.idempotency_key.rsplit(":", 2)[0] for call in provider.calls)


@dataclasses.dataclass
class TimedQueue:
    """Pushes the in-memory queue's messages at their visible time, in order, like the
    managed queue does; a nack (503) comes back after its Retry-After."""

    client: httpx.AsyncClient
    publisher: MemoryPublisher
    clock: FakeClock
    pending: list[PublishedMessage] = dataclasses.field(default_factory=list)
    answers: list[tuple[PublishedMessage, dict]] = dataclasses.field(default_factory=list)

    async def run_until(self, moment: datetime) -> None:
        """Deliver everything visible up to ``moment``, then leave the clock there."""
        self.pending.extend(self.publisher.drain())
        while due := [m for m in self.pending if m.visible_at <= moment]:
            message = min(due, key=lambda item: (item.visible_at, item.published_at))
            self.pending.remove(message)
            self.clock.set(max(self.clock.now, message.visible_at))
            response = await push_message(self.client, message)
            body = response.json()
            self.answers.append((message, body))
            if response.status_code == 503:
                retry = dataclasses.replace(
                    message,
                    published_at=self.clock.now,
                    delay_seconds=float(response.headers["retry-after"]),
                )
                self.pending.append(retry)
        self.clock.set(max(self.clock.now, moment))

    async def sweep_at(self, moment: datetime) -> dict:
        """Deliver up to ``moment``, then run the cron sweep there."""
        await self.run_until(moment)
        return await sweep(self.client)

    def outcomes(self) -> Counter[str]:
        """How many pushes ended in each outcome."""
        return Counter(body["outcome"] for _, body in self.answers)
