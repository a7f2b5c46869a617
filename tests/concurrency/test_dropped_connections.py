"""Defect 5: database sessions terminated during deliveries send nothing twice and answer
no 500.

Six rounds of ``pg_terminate_backend`` on every session of the service while 400 webhooks
go out to a real endpoint on loopback that counts ``webhook-id`` s. Before the fix a
finalize that failed after the provider accepted was dropped, the row stayed ``sending``,
and the redelivery after the lease sent the webhook again.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import select

from app.container import Container, build_container
from app.db.tables import send_records
from app.domain.messages import Delivery
from app.main import create_app
from app.services.receive import receive_delivery
from tests.conftest import make_settings
from tests.integration.test_ledger_connections import OTHER_SESSIONS, observer
from tests.support.channel_servers import WebhookSink, serve
from tests.support.clock import FakeClock
from tests.support.flow import API
from tests.support.ledger_states import seed_enqueued

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
COUNT = 400
ROUNDS = 6

pytestmark = pytest.mark.anyio
__all__ = ["observer"]  # a PostgreSQL connection of the test's own (skips on SQLite)


@pytest.fixture
def clock() -> FakeClock:
    """The service's clock, at NOW."""
    return FakeClock(NOW)


@pytest.fixture
async def sink() -> AsyncIterator[tuple[WebhookSink, str]]:
    """A webhook endpoint on loopback recording every POST."""
    recorder = WebhookSink()
    async with serve(recorder.app()) as base_url:
        yield recorder, base_url


@pytest.fixture
async def service(
    clean_database_url: str, tmp_path: Path, observer, clock: FakeClock
) -> AsyncIterator[Container]:
    """The service's real wiring with the real webhook provider (loopback allowed)."""
    settings = make_settings(
        clean_database_url, tmp_path, database_pool_size=8, webhook_provider="webhook",
        webhook_signing_secret=SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        webhook_allowed_targets=["127.0.0.0/8"],
    )  # fmt: skip
    built = build_container(settings, clock=clock)
    yield built
    await built.aclose()


async def seed(container: Container, url: str) -> list[str]:
    """COUNT enqueued webhook reminders of one customer, due now."""
    return await seed_enqueued(container.engine, COUNT, channels=("webhook",), webhook_url=url)


def delivery_of(reminder_id: str) -> Delivery:
    """The queue's message for one reminder's webhook."""
    payload = {"v": 1, "reminder_id": reminder_id, "channel": "webhook", "schedule_version": 1}
    return Delivery(queue="reminders", message_id=f"msg-{reminder_id}", payload=payload)


async def terminate_all(observer: asyncpg.Connection) -> int:
    """pg_terminate_backend on every session of the service; how many there were."""
    pids = [row["pid"] for row in await observer.fetch(OTHER_SESSIONS)]
    await observer.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", pids)
    return len(pids)


async def test_terminated_sessions_during_deliveries_send_nothing_twice(
    service, observer, sink, clock
):
    """Every webhook id arrives once, every delivery answers (no exception: no 500), every
    API read during the drops answers 200, and every reminder ends with its send recorded."""
    recorder, base_url = sink
    ids = await seed(service, f"{base_url}/hook")
    app = create_app(container=service)
    app.state.container = service
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
    waiting = collections.deque(ids)
    later: list[str] = []  # answered busy: the queue comes back after the lease
    failures: list[BaseException] = []
    statuses: list[int] = []
    killed: list[int] = []

    async def worker() -> None:
        while waiting:
            rid = waiting.popleft()
            try:
                answer = await receive_delivery(service.receiver, delivery_of(rid))
            except Exception as error:  # the push route would have answered 500
                failures.append(error)
                later.append(rid)  # the queue redelivers
                continue
            if not answer.outcome.acknowledges:
                later.append(rid)

    async def killer() -> None:
        for _ in range(ROUNDS):
            # Spread the rounds over the run: each waits for its share of webhooks.
            while len(recorder.received) < len(killed) * COUNT // (ROUNDS + 1) + 20:  # noqa: ASYNC110
                await asyncio.sleep(0.002)
            killed.append(await terminate_all(observer))
            statuses.append((await client.get(f"/v1/reminders/{ids[0]}", headers=API)).status_code)

    async with client:
        await asyncio.gather(killer(), *(worker() for _ in range(24)))
        for _ in range(3):  # redeliveries once every lease has expired
            clock.advance(seconds=61)
            waiting.extend(later)
            later.clear()
            await asyncio.gather(*(worker() for _ in range(8)))
    ids_seen = collections.Counter(r["headers"]["webhook-id"] for r in recorder.received)
    assert [wid for wid, times in ids_seen.items() if times > 1] == []
    assert len(ids_seen) == COUNT
    assert failures == []
    assert len(killed) == ROUNDS and all(killed)
    assert statuses == [200] * ROUNDS
    async with service.engine.connect() as conn:
        states = (await conn.execute(select(send_records.c.state))).scalars().all()
    assert collections.Counter(states) == {"sent": COUNT}
