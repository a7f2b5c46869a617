"""The embedded queue gives up on a message (its dead list); the reminder still goes out once.

Issue 12's defect: with the receiver unreachable the dispatcher used up the message's
redeliveries, the reminder stayed ``enqueued`` with no send record, and nothing brought
it back. The dispatcher here pushes through the in-process app (ASGI), so "down" is a
switch, not a sleep.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest

from app.adapters.queues.embedded.dispatcher import Dispatcher, DispatchLimits
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import PushFailed, PushResponse, PushTarget
from app.container import Container, build_container
from app.db import queue_repo
from app.db.engine import create_engine
from app.db.ledger import reminder_rows
from app.domain.retry import BackoffPolicy
from app.main import create_app
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.push import PUSH_SECRET

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class AsgiPusher:
    """Pushes through the in-process app; ``down`` plays an unreachable receiver."""

    client: httpx.AsyncClient
    down: bool = False

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, timeout: float
    ) -> PushResponse:
        if self.down:
            raise PushFailed("connection refused")
        response = await self.client.post(url, content=body, headers=dict(headers))
        return PushResponse(
            response.status_code,
            response.headers.get("retry-after"),
            response.json().get("outcome"),
        )


@pytest.fixture
async def queue_engine(clean_database_url):
    engine = create_engine(clean_database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
def publisher(queue_engine, clock):
    """The embedded queue, giving up after two redeliveries."""
    return EmbeddedQueuePublisher(queue_engine, max_retries=2, clock=clock)


@pytest.fixture
async def container(settings, clock, rand, provider, publisher) -> AsyncIterator[Container]:
    built = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    built.receiver = dataclasses.replace(built.receiver, providers={"email": provider})
    yield built
    await built.engine.dispose()


@pytest.fixture
async def client(container):
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


def dispatcher_for(queue_engine, clock, pusher) -> Dispatcher:
    return Dispatcher(
        queue_engine,
        pusher,
        PushTarget(base_url="http://testserver", secret=PUSH_SECRET.encode()),
        limits=DispatchLimits(concurrency=1, backoff=BackoffPolicy(1.0, 60.0)),
        clock=clock,
        rand=random.Random(3),
    )


async def test_a_message_in_the_dead_list_still_ends_in_one_send(
    client, clock, provider, queue_engine, container
):
    """Receiver down until the queue dead-lists the message; the sweep republishes it."""
    pusher = AsgiPusher(client, down=True)
    dispatcher = dispatcher_for(queue_engine, clock, pusher)
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    assert (await sweep(client))["enqueued"] == 1
    for _ in range(3):  # the first delivery and both redeliveries fail
        await dispatcher.run_once()
        clock.advance(minutes=5)
    async with queue_engine.connect() as conn:
        assert (await queue_repo.count_by_state(conn))["dead"] == 1
    async with container.engine.connect() as conn:
        assert await reminder_rows.list_send_records(conn, "r1") == []
    pusher.down = False
    clock.advance(minutes=20)
    assert (await sweep(client))["republished"] == 1
    report = await dispatcher.run_once()
    assert (report.claimed, report.acknowledged) == (1, 1)
    assert len(provider.calls) == 1
    clock.advance(hours=1)
    assert (await sweep(client))["republished"] == 0


ADMIN = {"Authorization": "Bearer test-admin-token-c4a8e2f6b0d3917a5e2c4b"}


async def test_the_dead_list_is_listed_and_redriven_through_the_operator_api(
    client, clock, provider, queue_engine
):
    """GET lists what the queue gave up on; POST redrive puts it back; one send in the end."""
    pusher = AsgiPusher(client, down=True)
    dispatcher = dispatcher_for(queue_engine, clock, pusher)
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    for _ in range(3):
        await dispatcher.run_once()
        clock.advance(minutes=5)
    assert (await client.get("/v1/queues/embedded/dead")).status_code == 401
    page = (await client.get("/v1/queues/embedded/dead", headers=ADMIN)).json()
    [dead] = page["items"]
    assert (dead["attempts"], dead["payload"]["reminder_id"]) == (3, "r1")
    assert "connection refused" in dead["last_error"]
    assert page["next_cursor"] is None
    pusher.down = False
    answer = await client.post(
        "/v1/queues/embedded/dead/redrive",
        json={"message_ids": [dead["message_id"], "not-dead"]},
        headers=ADMIN,
    )
    assert answer.json() == {"redriven": [dead["message_id"]], "count": 1}
    assert (await dispatcher.run_once()).acknowledged == 1
    assert len(provider.calls) == 1
    empty = await client.get("/v1/queues/embedded/dead", headers=ADMIN)
    assert empty.json()["items"] == []


async def test_dead_list_pages_follow_the_cursor_and_refuse_foreign_ones(
    client, clock, queue_engine, publisher
):
    """Pages of one follow each other; a cursor we did not hand out is a 422, never a 500."""
    from app.domain.messages import OutgoingMessage

    dispatcher = dispatcher_for(queue_engine, clock, AsgiPusher(client, down=True))
    for n in range(3):
        payload = {"v": 1, "reminder_id": f"r{n}", "channel": "email", "schedule_version": 1}
        await publisher.publish(OutgoingMessage("reminders", payload, 0, f"k{n}"))
    for _ in range(3):
        await dispatcher.run_once()
        clock.advance(minutes=5)
    seen, cursor = [], None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/queues/embedded/dead", params=params, headers=ADMIN)).json()
        seen += [item["payload"]["reminder_id"] for item in page["items"]]
        if not (cursor := page["next_cursor"]):
            break
    assert sorted(seen) == ["r0", "r1", "r2"]
    for bad in ("²", "2026-01-01T00:00:00|999999999999999999999999999999", "x|1"):
        answer = await client.get("/v1/queues/embedded/dead", params={"cursor": bad}, headers=ADMIN)
        assert answer.status_code == 422, bad


async def test_dead_list_refuses_text_a_database_cannot_store(client):
    """A NUL in a message id or a cursor is a 422 naming the rule (PostgreSQL answered 500)."""
    answer = await client.post(
        "/v1/queues/embedded/dead/redrive", json={"message_ids": ["\x00"]}, headers=ADMIN
    )
    assert answer.status_code == 422
    assert "NUL" in answer.text
    listing = await client.get("/v1/queues/embedded/dead?cursor=%00", headers=ADMIN)
    assert listing.status_code == 422
