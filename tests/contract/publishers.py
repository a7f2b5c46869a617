"""The queue publishers that must pass ``test_publisher_contract.py``.

To put a publisher under the contract, append a ``PublisherCase`` to ``PUBLISHER_FACTORIES``:
a name and a factory. The factory is an async context manager that receives a
``PublisherEnv`` and yields a ``PublisherUnderTest``: the publisher, a view of what the
queue now holds (for a REST queue, what its loopback fake received; for a table-backed
queue, its rows) and the queue's idempotency window. The publisher, and any fake server
behind it, must read time from ``env.clock`` so the suite can step across that window.
Messages go to ``CONTRACT_QUEUE``; create it first if the queue needs that.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.infrai.publisher import InfraiPublisher
from app.adapters.queues.memory.publisher import MemoryPublisher
from app.adapters.queues.qstash.publisher import QStashPublisher
from app.adapters.queues.sns.publisher import SnsPublisher
from app.db import queue_repo
from app.db.engine import create_engine
from app.domain.ports import QueuePublisher
from app.domain.queueing import DEDUP_WINDOW
from tests.support.aws_fixtures import CREDENTIALS, REGION
from tests.support.clock import FakeClock
from tests.support.fake_qstash import FREE_PLAN_DELAY, FakeQStash
from tests.support.fake_qstash import TOKEN as QSTASH_TOKEN
from tests.support.infrai_fixtures import RecordingSleep, make_api

CONTRACT_QUEUE = "contract-reminders"


@dataclass(frozen=True)
class PublisherEnv:
    """What a factory may use: the clock, an emptied migrated database, a temp dir, and
    ``request`` to fetch other *synchronous* fixtures (async ones cannot be fetched here)."""

    clock: FakeClock
    database_url: str
    tmp_path: Path
    request: pytest.FixtureRequest


@dataclass(frozen=True)
class HeldMessage:
    """One message as the queue holds it."""

    message_id: str
    queue: str
    payload: dict[str, Any]
    delay_seconds: float


@dataclass(frozen=True)
class PublisherUnderTest:
    """A publisher, a view of the queue behind it, and that queue's idempotency window."""

    publisher: QueuePublisher
    # Every message the queue holds now, in publish order (duplicates it accepted included).
    held: Callable[[], Awaitable[list[HeldMessage]]]
    dedup_window: timedelta = DEDUP_WINDOW
    # False where the queue under test cannot show publish deduplication (Pub/Sub keeps
    # none; the Cloud Tasks emulator accepts a repeated task name): those tests skip.
    deduplicates: bool = True


PublisherFactory = Callable[[PublisherEnv], AbstractAsyncContextManager[PublisherUnderTest]]


@dataclass(frozen=True)
class PublisherCase:
    """One entry of the contract's parametrization."""

    name: str
    factory: PublisherFactory


@asynccontextmanager
async def memory_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The in-memory publisher shipped in the package."""
    publisher = MemoryPublisher(clock=env.clock)

    async def held() -> list[HeldMessage]:
        return [
            HeldMessage(m.message_id, m.queue, m.payload, m.delay_seconds)
            for m in publisher.messages
        ]

    yield PublisherUnderTest(publisher, held)


@asynccontextmanager
async def embedded_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The embedded queue: rows of ``queue_messages`` in the test database."""
    engine = create_engine(env.database_url)

    async def held() -> list[HeldMessage]:
        async with engine.connect() as conn:
            rows = await queue_repo.list_messages(conn, queue=CONTRACT_QUEUE, limit=10_000)
        return [
            HeldMessage(
                row["message_id"],
                row["queue"],
                row["payload"],
                (row["visible_at"] - row["created_at"]).total_seconds(),
            )
            for row in rows
        ]

    try:
        publisher = EmbeddedQueuePublisher(engine, clock=env.clock)
        yield PublisherUnderTest(publisher, held, DEDUP_WINDOW)
    finally:
        await engine.dispose()


@asynccontextmanager
async def infrai_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The Infrai REST publisher against the fake Infrai on loopback."""
    fake = env.request.getfixturevalue("fake_infrai")  # emptied, on env.clock
    fake.add_queue(CONTRACT_QUEUE)

    async def held() -> list[HeldMessage]:
        return [
            HeldMessage(
                m.message_id, m.queue, m.payload, (m.visible_at - m.published_at).total_seconds()
            )
            for m in fake.queues[CONTRACT_QUEUE].messages
        ]

    verify = env.request.getfixturevalue("tls_context")
    async with httpx.AsyncClient(timeout=5, verify=verify) as http:
        api = make_api(http, fake.base_url, sleep=RecordingSleep(), now=env.clock)
        yield PublisherUnderTest(InfraiPublisher(api), held, fake.idempotency_window)


@asynccontextmanager
async def sns_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The SNS publisher against moto's SNS server on loopback (no delay, no dedup)."""
    moto = env.request.getfixturevalue("moto")
    topic = moto.create_topic(CONTRACT_QUEUE)

    async def held() -> list[HeldMessage]:
        return [
            HeldMessage(sent[0], CONTRACT_QUEUE, json.loads(sent[1]), 0.0)
            for sent in moto.sent(CONTRACT_QUEUE)
        ]

    publisher = SnsPublisher(
        {CONTRACT_QUEUE: topic},
        region=REGION,
        endpoint_url=moto.endpoint_url,
        client_options=CREDENTIALS,
    )
    try:
        yield PublisherUnderTest(publisher, held, deduplicates=False)
    finally:
        await publisher.aclose()


@asynccontextmanager
async def qstash_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """The QStash publisher against a loopback server speaking the documented API."""
    fake = FakeQStash(env.clock)
    await fake.start()
    prefix = "https://reminders.example.com/push/"

    async def held() -> list[HeldMessage]:
        return [
            HeldMessage(m.message_id, m.destination.removeprefix(prefix), json.loads(m.body),
                        m.delay_seconds)
            for m in fake.messages
        ]  # fmt: skip

    http = SharedHttp()
    try:
        publisher = QStashPublisher(
            http,
            base_url=fake.base_url,
            token=SecretStr(QSTASH_TOKEN),
            push_url_for=lambda queue: prefix + queue,
            max_delay_seconds=FREE_PLAN_DELAY,
            clock=env.clock,
        )
        yield PublisherUnderTest(publisher, held, fake.dedup_window)
    finally:
        await http.aclose()
        await fake.stop()


def _google_case(name: str) -> PublisherCase:
    # Imported late: the Google factories import this module's types.
    from tests.contract import google_publishers

    return PublisherCase(name, getattr(google_publishers, f"{name}_publisher"))


def _pull_case(name: str) -> PublisherCase:
    # Imported late, like the Google factories.
    from tests.contract import pull_publishers

    return PublisherCase(name, getattr(pull_publishers, f"{name}_publisher"))


PUBLISHER_FACTORIES: list[PublisherCase] = [
    PublisherCase("memory", memory_publisher),
    PublisherCase("embedded", embedded_publisher),
    PublisherCase("infrai", infrai_publisher),
    PublisherCase("sns", sns_publisher),
    PublisherCase("qstash", qstash_publisher),
    _google_case("cloudtasks"),
    _google_case("pubsub"),
    _pull_case("sqs"),
    _pull_case("rabbitmq"),
]
