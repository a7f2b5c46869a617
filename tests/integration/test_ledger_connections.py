"""The process's database connections on PostgreSQL: one budget, and no dead one reused.

``REMINDERS_DATABASE_POOL_SIZE`` bounds every connection the service opens, the engine's
pool and the ledger's raw asyncpg pool together; a connection the server terminated is
never handed out again. Counted from the server's side (``pg_stat_activity``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import insert

from app.container import Container, build_container
from app.db.tables import customers, reminders
from app.domain.messages import Delivery
from app.domain.states import Outcome
from app.services.receive import receive_delivery
from tests.conftest import make_settings
from tests.support.clock import FakeClock
from tests.support.providers import ScriptedProvider

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
POOL_SIZE = 4
OTHER_SESSIONS = """
SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""

pytestmark = pytest.mark.anyio


@pytest.fixture
async def observer(clean_database_url: str, db_backend: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of the test's own, outside the service's pools."""
    if db_backend != "postgresql":
        pytest.skip("counts server sessions of PostgreSQL")
    conn = await asyncpg.connect(clean_database_url.replace("+asyncpg", ""))
    yield conn
    await conn.close()


@pytest.fixture
async def service(clean_database_url: str, tmp_path: Path) -> AsyncIterator[Container]:
    """The service's real wiring with a small connection budget and a scripted provider."""
    settings = make_settings(clean_database_url, tmp_path, database_pool_size=POOL_SIZE)
    built = build_container(settings, clock=FakeClock(NOW))
    provider = ScriptedProvider()
    built.receiver = dataclasses.replace(
        built.receiver, providers={"email": provider, "webhook": provider}
    )
    yield built
    await built.aclose()


async def seed(container: Container, count: int) -> list[str]:
    """``count`` enqueued email reminders of one customer, due now."""
    ids = [f"rem-{index}" for index in range(count)]
    async with container.engine.begin() as conn:
        await conn.execute(
            insert(customers).values(
                id="cust-1", email="ada@example.com", time_zone="UTC", created_at=NOW,
                updated_at=NOW,
            )
        )  # fmt: skip
        await conn.execute(
            insert(reminders),
            [
                dict(
                    id=reminder_id, customer_id="cust-1", kind="renewal", due_at=NOW,
                    channels=["email"], data={}, state="enqueued", schedule_version=1,
                    created_at=NOW, updated_at=NOW,
                )
                for reminder_id in ids
            ],
        )  # fmt: skip
    return ids


def delivery_of(reminder_id: str) -> Delivery:
    """The queue's message for one reminder's email."""
    payload = {"v": 1, "reminder_id": reminder_id, "channel": "email", "schedule_version": 1}
    return Delivery(queue="reminders", message_id=f"msg-{reminder_id}", payload=payload)


def malformed(index: int) -> Delivery:
    """An authentic but unusable message: quarantined through the engine's pool."""
    return Delivery(queue="reminders", message_id=f"bad-{index}", payload={"v": 99})


async def sessions(observer: asyncpg.Connection) -> set[int]:
    """The server sessions of the test database other than the observer's."""
    return {row["pid"] for row in await observer.fetch(OTHER_SESSIONS)}


async def test_concurrent_load_opens_no_more_connections_than_the_pool_size(service, observer):
    """Deliveries (raw ledger path) and quarantines (engine path) at once, 64 in flight:
    the service never has more than REMINDERS_DATABASE_POOL_SIZE sessions open."""
    ids = await seed(service, 48)
    before = await sessions(observer)
    peak = 0
    done = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, len(await sessions(observer) - before))
            await asyncio.sleep(0)  # yield to the load between samples

    watcher = asyncio.create_task(watch())
    work = [receive_delivery(service.receiver, delivery_of(rid)) for rid in ids]
    work += [receive_delivery(service.receiver, malformed(index)) for index in range(16)]
    answers = await asyncio.gather(*work)
    done.set()
    await watcher
    opened = len(await sessions(observer) - before)
    assert [answer.outcome for answer in answers] == [Outcome.SENT] * 48 + [Outcome.REJECTED] * 16
    assert 0 < opened <= POOL_SIZE
    assert peak <= POOL_SIZE


async def test_a_connection_the_server_terminated_is_not_handed_out_again(service, observer):
    """After pg_terminate_backend of every session of the service, the next delivery and
    the next quarantine succeed on fresh connections instead of failing on dead ones."""
    first, second = await seed(service, 2)
    answer = await receive_delivery(service.receiver, delivery_of(first))
    assert answer.outcome == Outcome.SENT
    assert (await receive_delivery(service.receiver, malformed(0))).outcome == Outcome.REJECTED
    killed = await sessions(observer)
    assert killed
    await observer.execute(
        "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", list(killed)
    )
    deadline = asyncio.get_running_loop().time() + 10
    while await sessions(observer) & killed:  # the backends exit shortly after the signal
        assert asyncio.get_running_loop().time() < deadline, "the sessions never ended"
        await asyncio.sleep(0.01)
    answer = await receive_delivery(service.receiver, delivery_of(second))
    assert answer.outcome == Outcome.SENT
    assert (await receive_delivery(service.receiver, malformed(1))).outcome == Outcome.REJECTED
    assert not (await sessions(observer)) & killed
