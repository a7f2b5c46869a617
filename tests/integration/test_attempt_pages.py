"""On PostgreSQL an attempt's outcome is written on its row's own page (a HOT update, no
new index entries): ``send_attempts`` leaves room on each page for each row's one update
(migration 0021). Before, the pages had filled with later claims' attempts, and every
outcome wrote a new version elsewhere and an entry in each of the table's three indexes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, text

from app.db.ledger import PgLedger, ledger_for
from app.db.tables import customers, reminders
from app.domain.ledger import AttemptEnd, Claim, LedgerKey
from tests.integration.test_ledger_gateways import SENT
from tests.support.ledger_gateways import engine

pytestmark = pytest.mark.anyio
__all__ = ["engine"]

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
COUNT = 400  # attempts on ten pages and more
ENDED = AttemptEnd("sent", provider_called=True)


async def seed(engine, *, count: int = COUNT, state: str = "enqueued") -> None:
    """``count`` customers r0.. each with one email reminder ``r{n}`` due at NOW."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers),
            [{"id": f"c{n}", "email": f"c{n}@example.com", "created_at": NOW, "updated_at": NOW}
             for n in range(count)],
        )  # fmt: skip
        await conn.execute(
            insert(reminders),
            [{"id": f"r{n}", "customer_id": f"c{n}", "kind": "renewal", "due_at": NOW,
              "channels": ["email"], "data": {}, "state": state, "schedule_version": 1,
              "created_at": NOW, "updated_at": NOW} for n in range(count)],
        )  # fmt: skip


async def attempt_pages(engine) -> dict[str, int]:
    """Each attempt's reminder and the heap page its current version is on."""
    async with engine.connect() as conn:
        found = await conn.execute(
            text("SELECT reminder_id, (ctid::text::point)[0]::int FROM send_attempts")
        )
        return {reminder: page for reminder, page in found.all()}


async def claim_all(ledger: PgLedger, count: int) -> list[Claim]:
    """Claim the email send of every seeded reminder at NOW, concurrently (group claims)."""
    lease = NOW + timedelta(minutes=5)
    claims = await asyncio.gather(
        *(ledger.claim_or_read(LedgerKey(f"r{n}", "email", "outbox"), now=NOW,
                               lease_until=lease) for n in range(count))
    )  # fmt: skip
    assert all(claim.claimed for claim in claims)
    return claims


async def send_all(ledger: PgLedger, claims: list[Claim]) -> None:
    """Finalize every claim as sent, concurrently (group finalizes)."""
    await asyncio.gather(
        *(ledger.finalize_send(claim.record, claim.context[0], now=NOW, values=SENT,
                               ended=ENDED) for claim in claims)
    )  # fmt: skip


async def test_an_attempts_outcome_stays_on_its_page(engine, db_backend):
    if db_backend != "postgresql":
        pytest.skip("fillfactor and HOT updates are PostgreSQL's")
    await seed(engine)
    ledger = ledger_for(engine, raw_connections=4)
    assert isinstance(ledger, PgLedger)
    try:
        claims = await claim_all(ledger, COUNT)
        before = await attempt_pages(engine)
        assert len(set(before.values())) >= 4  # the attempts fill several pages
        await send_all(ledger, claims)
    finally:
        await ledger.close()
    after = await attempt_pages(engine)
    moved = [reminder for reminder, page in after.items() if page != before[reminder]]
    assert moved == []
    async with engine.connect() as conn:
        outcomes = await conn.execute(
            text("SELECT count(*) FROM send_attempts WHERE outcome = 'sent'")
        )
        assert outcomes.scalar() == COUNT
