"""No database connection is borrowed, and no transaction open, while a provider is called.

A probe provider looks at the database from inside ``send``: the engine's pool and the
receiver's ledger gateway have nothing checked out, and on PostgreSQL a separate
connection finds no other session of the test database inside a transaction
(``pg_stat_activity.xact_start``), idle or not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.container import Container
from app.domain.errors import TransientProviderError
from app.domain.messages import RenderedMessage, SendResult
from app.services.receive import Receiver
from tests.support.flow import push_message, put_customer, put_reminder, sweep

OPEN_TRANSACTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
"""


@dataclass
class Observation:
    pool_checked_out: int
    ledger_checked_out: int
    open_transactions: int | None


@dataclass
class ProbeProvider:
    """A channel provider that observes the database while it is being called."""

    engine: AsyncEngine
    receiver: Receiver | None = None
    database_dsn: str | None = None  # PostgreSQL only
    fail: bool = False
    name: str = "probe"
    seen: list[Observation] = field(default_factory=list)

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        assert self.receiver is not None
        self.seen.append(
            Observation(
                pool_checked_out=self.engine.pool.checkedout(),  # type: ignore[attr-defined]
                ledger_checked_out=self.receiver.ledger.checked_out,
                open_transactions=await self._open_transactions(),
            )
        )
        if self.fail:
            raise TransientProviderError("try later", detail_class="probe")
        return SendResult(f"probe-{len(self.seen)}")

    async def _open_transactions(self) -> int | None:
        if self.database_dsn is None:
            return None
        conn = await asyncpg.connect(self.database_dsn)
        try:
            return int(await conn.fetchval(OPEN_TRANSACTIONS))
        finally:
            await conn.close()


@pytest.fixture
def probe(container: Container, db_backend: str, clean_database_url: str) -> ProbeProvider:
    dsn = clean_database_url.replace("+asyncpg", "") if db_backend == "postgresql" else None
    provider = ProbeProvider(container.engine, database_dsn=dsn)
    container.receiver = dataclasses.replace(
        container.receiver, providers={"email": provider, "webhook": provider}
    )
    provider.receiver = container.receiver
    return provider


async def deliver(client, clock, publisher, reminder_id: str) -> dict:
    """Register, sweep and push one email reminder; the push answer's body."""
    await put_customer(client, "c1")
    await put_reminder(client, reminder_id, customer_id="c1", due_at=clock.now)
    assert (await sweep(client))["enqueued"] == 1
    [message] = publisher.drain()
    response = await push_message(client, message)
    return response.json()


def assert_nothing_held(probe: ProbeProvider, db_backend: str) -> None:
    """The probe saw no borrowed connection and, on PostgreSQL, no open transaction."""
    assert probe.seen, "the provider was never called"
    for seen in probe.seen:
        assert seen.pool_checked_out == 0
        assert seen.ledger_checked_out == 0
        if db_backend == "postgresql":
            assert seen.open_transactions == 0
        else:
            assert seen.open_transactions is None


async def test_no_connection_or_transaction_is_held_during_a_successful_send(
    client, clock, publisher, probe, db_backend
):
    """During the provider call of a delivery that ends sent, the database is untouched."""
    assert (await deliver(client, clock, publisher, "r1"))["outcome"] == "sent"
    assert_nothing_held(probe, db_backend)


async def test_no_connection_or_transaction_is_held_during_a_failing_send(
    client, clock, publisher, probe, db_backend
):
    """The same holds when the provider fails and the delivery is retried later."""
    probe.fail = True
    assert (await deliver(client, clock, publisher, "r2"))["outcome"] == "retry"
    assert_nothing_held(probe, db_backend)


async def test_the_probe_sees_an_open_transaction_when_there_is_one(container, probe, db_backend):
    """The probe can fail: a transaction held open elsewhere shows up in what it sees."""
    async with container.engine.connect() as conn:
        await conn.exec_driver_sql("SELECT 1")  # autobegin: a transaction is now open
        await probe.send(RenderedMessage("email", "a@example.com"), idempotency_key="k", timeout=1)
    [seen] = probe.seen
    assert seen.pool_checked_out == 1
    if db_backend == "postgresql":
        assert seen.open_transactions == 1
