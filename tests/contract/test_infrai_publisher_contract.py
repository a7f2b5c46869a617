"""The queue-publisher contract, run against the in-memory reference and the Infrai publisher.

Until the shared ``tests/contract/publishers.py`` (``PUBLISHER_FACTORIES``) exists, this file
holds the factories; each yields a ``PublisherHarness``: the publisher and a reader of what
the queue stored. The Infrai factory points at the fake Infrai on loopback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.adapters.queues.infrai import InfraiPublisher
from app.adapters.queues.memory import MemoryPublisher
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.ports import QueuePublisher
from tests.support.infrai_fixtures import make_api

pytestmark = pytest.mark.anyio

QUEUE = "contract"
SEVEN_DAYS = 7 * 24 * 3600


@dataclass
class PublisherHarness:
    """A publisher and what its queue holds: ``stored() -> [(id, payload, delay_seconds)]``."""

    publisher: QueuePublisher
    stored: Callable[[], list[tuple[str, dict[str, Any], float]]]


def memory_factory(request: pytest.FixtureRequest) -> PublisherHarness:
    publisher = MemoryPublisher(clock=request.getfixturevalue("clock"))
    return PublisherHarness(
        publisher,
        lambda: [(m.message_id, m.payload, m.delay_seconds) for m in publisher.messages],
    )


def infrai_factory(request: pytest.FixtureRequest) -> PublisherHarness:
    fake = request.getfixturevalue("fake_infrai")
    fake.add_queue(QUEUE)
    api = make_api(
        request.getfixturevalue("infrai_http"),
        fake.base_url,
        sleep=request.getfixturevalue("sleeps"),
        now=request.getfixturevalue("clock"),
    )

    def stored() -> list[tuple[str, dict[str, Any], float]]:
        return [
            (m.message_id, m.payload, (m.visible_at - m.published_at).total_seconds())
            for m in fake.queues[QUEUE].messages
        ]

    return PublisherHarness(InfraiPublisher(api), stored)


PUBLISHER_FACTORIES = [memory_factory, infrai_factory]


@pytest.fixture(params=PUBLISHER_FACTORIES, ids=lambda factory: factory.__name__)
def harness(request: pytest.FixtureRequest) -> PublisherHarness:
    return request.param(request)


def message(n: int, *, delay: float = 30, key: str | None = None) -> OutgoingMessage:
    payload = {"v": 1, "reminder_id": f"r{n}", "channel": "email", "schedule_version": 1}
    return OutgoingMessage(QUEUE, payload, delay, key if key is not None else f"r{n}:email:v1")


async def test_publish_stores_the_payload_with_its_delay(harness):
    """One publish: an id back, the payload stored as sent, visible after the delay."""
    message_id = await harness.publisher.publish(message(1, delay=90))
    assert isinstance(message_id, str) and message_id
    assert harness.stored() == [(message_id, message(1).payload, 90)]


async def test_the_same_idempotency_key_returns_the_same_id(harness):
    """A re-publish with the same key (a sweep that crashed before marking) is absorbed."""
    first = await harness.publisher.publish(message(1))
    assert await harness.publisher.publish(message(1)) == first
    assert len(harness.stored()) == 1


async def test_batch_ids_come_back_in_order(harness):
    """publish_batch returns one id per message, in order; an empty batch is a no-op."""
    ids = await harness.publisher.publish_batch([message(1), message(2), message(3)])
    by_id = {stored_id: payload["reminder_id"] for stored_id, payload, _ in harness.stored()}
    assert [by_id[i] for i in ids] == ["r1", "r2", "r3"]
    assert await harness.publisher.publish_batch([]) == []


async def test_the_delay_horizon_is_seven_days(harness):
    """max_delay_seconds is the managed queue's 7 days, and a message at the edge is accepted."""
    assert harness.publisher.max_delay_seconds == SEVEN_DAYS
    await harness.publisher.publish(message(1, delay=SEVEN_DAYS))
    assert harness.stored()[0][2] == SEVEN_DAYS


async def test_oversized_payloads_and_missing_keys_are_refused(harness):
    """Over 256 KB or without an idempotency key: PublishError, nothing stored."""
    big = OutgoingMessage(QUEUE, {"blob": "x" * (256 * 1024)}, 0, "big")
    with pytest.raises(PublishError):
        await harness.publisher.publish(big)
    with pytest.raises(PublishError):
        await harness.publisher.publish(message(1, key=""))
    with pytest.raises(PublishError):
        await harness.publisher.publish_batch([message(2), big])
    assert harness.stored() == []
