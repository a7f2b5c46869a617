"""The contract every queue publisher passes (parametrized over ``PUBLISHER_FACTORIES``)."""

from dataclasses import replace
from datetime import timedelta

import pytest

from app.domain.errors import PublishError
from app.domain.messages import DeliveryPayload, OutgoingMessage
from app.domain.ports import MAX_MESSAGE_BYTES
from app.domain.queueing import MAX_IDEMPOTENCY_KEY, MAX_QUEUE_NAME
from tests.contract.publishers import CONTRACT_QUEUE, PUBLISHER_FACTORIES, PublisherEnv

pytestmark = pytest.mark.anyio

QUEUE = CONTRACT_QUEUE


@pytest.fixture(params=PUBLISHER_FACTORIES, ids=lambda case: case.name)
async def queue(request, clock, clean_database_url, tmp_path):
    """One publisher under test, with its view of the queue."""
    env = PublisherEnv(
        clock=clock, database_url=clean_database_url, tmp_path=tmp_path, request=request
    )
    async with request.param.factory(env) as under_test:
        yield under_test


def fitting(queue, seconds: float) -> float:
    """``seconds``, or the publisher's whole horizon when it is shorter (Pub/Sub's is 0)."""
    return min(seconds, queue.publisher.max_delay_seconds)


def needs_deduplication(queue) -> None:
    """Skip where the queue under test cannot show publish deduplication (see the case)."""
    if not queue.deduplicates:
        pytest.skip("the queue under test keeps no publish idempotency it can show")


def message(
    n: int = 1, *, delay: float = 0.0, key: str | None = None, **payload
) -> OutgoingMessage:
    """A message like the sweep publishes: identifiers only, a delay and a key."""
    body = DeliveryPayload(f"r{n}", "email", 1).to_json() | payload
    return OutgoingMessage(
        queue=QUEUE,
        payload=body,
        delay_seconds=delay,
        idempotency_key=key if key is not None else f"r{n}:email:v1",
    )


async def test_publish_returns_an_id_and_the_queue_holds_the_message(queue):
    """publish returns an id; the queue holds the payload as sent, due no earlier than asked.

    Queues with whole-second delays may round up (never down: that would deliver early).
    """
    delay = fitting(queue, 90.5)
    outgoing = message(delay=delay)
    message_id = await queue.publisher.publish(outgoing)
    assert isinstance(message_id, str) and message_id
    [held] = await queue.held()
    assert held.message_id == message_id
    assert (held.queue, held.payload) == (QUEUE, outgoing.payload)
    assert delay <= held.delay_seconds < delay + 1


async def test_different_keys_get_different_ids(queue):
    """Two messages with different keys are two messages."""
    first = await queue.publisher.publish(message(1))
    second = await queue.publisher.publish(message(2))
    assert first != second
    assert len(await queue.held()) == 2


async def test_same_key_within_the_window_returns_the_same_id(queue, clock):
    """A repeated key inside the dedup window (at least 5 minutes) returns the first id."""
    needs_deduplication(queue)
    assert queue.dedup_window >= timedelta(minutes=5)
    first = await queue.publisher.publish(message())
    clock.advance(seconds=queue.dedup_window.total_seconds() - 1)
    again = await queue.publisher.publish(message())
    assert again == first
    assert [held.message_id for held in await queue.held()] == [first]


async def test_same_key_after_the_window_is_a_new_message(queue, clock):
    """After the dedup window the same key publishes again with a new id."""
    needs_deduplication(queue)
    first = await queue.publisher.publish(message())
    clock.advance(seconds=queue.dedup_window.total_seconds() + 1)
    later = await queue.publisher.publish(message())
    assert later != first
    assert [held.message_id for held in await queue.held()] == [first, later]


async def test_missing_idempotency_key_is_refused(queue):
    """Every message needs a key: without one a crash-republish could not be absorbed."""
    with pytest.raises(PublishError):
        await queue.publisher.publish(message(key=""))
    assert await queue.held() == []


async def test_max_delay_is_accepted_and_above_is_refused(queue):
    """delay == max_delay is fine; one second more is a PublishError and nothing is held."""
    max_delay = queue.publisher.max_delay_seconds
    assert max_delay >= 0
    await queue.publisher.publish(message(1, delay=max_delay))
    with pytest.raises(PublishError):
        await queue.publisher.publish(message(2, delay=max_delay + 1))
    assert [held.delay_seconds for held in await queue.held()] == [max_delay]


async def test_negative_delay_is_refused(queue):
    """A negative delay is a programming error the publisher refuses."""
    with pytest.raises(PublishError):
        await queue.publisher.publish(message(delay=-1))
    assert await queue.held() == []


async def test_zero_delay_is_accepted(queue):
    """Overdue reminders go out with delay 0."""
    await queue.publisher.publish(message(delay=0))
    assert [held.delay_seconds for held in await queue.held()] == [0]


async def test_payload_over_256_kb_is_refused(queue):
    """A message above the 256 KB ceiling is a PublishError and nothing is held."""
    with pytest.raises(PublishError):
        await queue.publisher.publish(message(blob="x" * (MAX_MESSAGE_BYTES + 1024)))
    assert await queue.held() == []


async def test_large_payload_under_the_limit_is_accepted(queue):
    """A payload comfortably under the ceiling (192 KB) is published intact."""
    outgoing = message(blob="y" * (192 * 1024))
    await queue.publisher.publish(outgoing)
    [held] = await queue.held()
    assert held.payload == outgoing.payload


async def test_batch_returns_ids_in_order_and_equals_singles(queue, clock):
    """publish_batch returns one id per message in order; singles of the same keys match them."""
    batch = [message(n, delay=fitting(queue, float(n))) for n in range(1, 6)]
    ids = await queue.publisher.publish_batch(batch)
    assert len(ids) == 5
    assert len(set(ids)) == 5
    held = await queue.held()
    assert [h.message_id for h in held] == ids
    assert [h.payload["reminder_id"] for h in held] == [f"r{n}" for n in range(1, 6)]
    assert [h.delay_seconds for h in held] == [m.delay_seconds for m in batch]
    needs_deduplication(queue)
    clock.advance(minutes=1)
    singles = [await queue.publisher.publish(m) for m in batch]
    assert singles == ids
    assert len(await queue.held()) == 5


async def test_singles_then_batch_deduplicate_the_same_way(queue):
    """A batch repeating keys published singly returns their ids, and adds the new one."""
    needs_deduplication(queue)
    first = await queue.publisher.publish(message(1))
    ids = await queue.publisher.publish_batch([message(1), message(2)])
    assert ids[0] == first
    assert ids[1] != first
    assert [h.message_id for h in await queue.held()] == ids


async def test_empty_batch_publishes_nothing(queue):
    """An empty batch is a no-op."""
    assert await queue.publisher.publish_batch([]) == []
    assert await queue.held() == []


async def test_batch_with_a_refused_message_raises_and_publishes_nothing(queue):
    """A batch holding an over-long delay is refused whole (the sweep retries it whole)."""
    too_late = message(
        9, delay=queue.publisher.max_delay_seconds + timedelta(days=1).total_seconds()
    )
    with pytest.raises(PublishError):
        await queue.publisher.publish_batch([message(1), too_late])
    with pytest.raises(PublishError):
        await queue.publisher.publish_batch([message(2), message(3, blob="z" * MAX_MESSAGE_BYTES)])
    assert await queue.held() == []


async def test_key_at_the_length_limit_is_accepted_and_longer_is_refused(queue):
    """A key of the longest allowed length publishes; one character more is refused."""
    longest = "k" * MAX_IDEMPOTENCY_KEY
    await queue.publisher.publish(message(1, key=longest))
    with pytest.raises(PublishError):
        await queue.publisher.publish(message(2, key=longest + "k"))
    with pytest.raises(PublishError):
        await queue.publisher.publish_batch([message(3), message(4, key=longest + "k")])
    assert [held.payload["reminder_id"] for held in await queue.held()] == ["r1"]


async def test_over_long_queue_name_is_refused_and_its_batch_publishes_nothing(queue):
    """A queue name above the limit is refused, and a batch holding one is refused whole."""
    elsewhere = replace(message(2), queue="q" * (MAX_QUEUE_NAME + 1))
    with pytest.raises(PublishError):
        await queue.publisher.publish(elsewhere)
    with pytest.raises(PublishError):
        await queue.publisher.publish_batch([message(1), elsewhere])
    assert await queue.held() == []
