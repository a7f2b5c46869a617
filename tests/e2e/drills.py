"""Helpers of the give-up drills: a queue drops a message, the sweep's catch-up brings it back.

A real ``reminders serve`` reads the wall clock, and the catch-up margin is at least 60 s,
with our backoff set longer still so the queue gives up first. Rather than wait that long,
a drill moves every stored instant of the ledger back: to the service this is the same as
its clock moving forward (nothing else it compares with those instants is stored).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.tables import reminders, send_records

if TYPE_CHECKING:  # the fixture module: imported by pytest, not by helpers
    from tests.e2e.conftest import Endpoint

# The drills' configuration: the provider's one failure is retried only after
# BACKOFF_SECONDS, long after the queue gave up; a message overdue by more than
# MARGIN_SECONDS (the floor) is republished. The failure is a 429 whose Retry-After is
# BACKOFF_SECONDS: the retry time is then exact (a 503's backoff is jittered, from 1 s up).
BACKOFF_SECONDS = "600"
MARGIN_SECONDS = "60"
DRILL_SETTINGS = {
    "REMINDERS_BACKOFF_BASE_SECONDS": BACKOFF_SECONDS,
    "REMINDERS_BACKOFF_CAP_SECONDS": BACKOFF_SECONDS,
    "REMINDERS_CATCHUP_MARGIN_SECONDS": MARGIN_SECONDS,
}
# Past our retry time and the margin: what a drill ages the ledger by.
LATER = timedelta(seconds=int(BACKOFF_SECONDS) + int(MARGIN_SECONDS) + 60)

_INSTANTS = {
    reminders: ("due_at", "sweep_claimed_until", "enqueued_at", "created_at", "updated_at"),
    send_records: (
        "lease_until", "next_attempt_at", "first_attempt_at", "sent_at", "created_at", "updated_at"
    ),
}  # fmt: skip


async def age_ledger(engine: AsyncEngine, by: timedelta) -> None:
    """Move every instant of every reminder and ledger row ``by`` into the past."""
    async with engine.begin() as conn:
        for table, names in _INSTANTS.items():
            columns = [table.c[name] for name in names]
            for row in (await conn.execute(select(table.c.id, *columns))).all():
                values = {name: row[i + 1] for i, name in enumerate(names)}
                aged = {name: value - by for name, value in values.items() if value is not None}
                await conn.execute(update(table).where(table.c.id == row.id).values(**aged))


async def assert_only_our_retry_is_owed(ledger: Any, endpoint: Endpoint) -> None:
    """After the queue gave up: one failed call, the ledger row waiting on our retry."""
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("pending", 1)
    assert len(endpoint.requests) == 1 and not endpoint.accepted


async def catch_up_and_send_once(
    deployment: Any, ledger: Any, endpoint: Endpoint, *, busy: int
) -> None:
    """Later: the sweep republishes the lost message and the reminder is sent exactly once."""
    await age_ledger(ledger.engine, LATER)
    assert (await deployment.sweep())["republished"] == 1
    await deployment.wait_sent(ledger, 1, timeout=60)
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("sent", 2)
    assert len(endpoint.requests) == 2 and sum(endpoint.accepted.values()) == 1
    assert await deployment.outcomes() == {"retry": 1, "busy": busy, "sent": 1}


def fail_once_for_longer_than_the_queue_waits(endpoint: Endpoint) -> None:
    """The webhook answers its first call 429 with ``Retry-After: BACKOFF_SECONDS``."""
    endpoint.script = [429]
    endpoint.retry_after = BACKOFF_SECONDS
