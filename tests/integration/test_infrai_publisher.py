"""The Infrai publisher against the fake Infrai on loopback: bodies, retries, errors, batch."""

from __future__ import annotations

import random
import socket
from datetime import timedelta
from email.utils import format_datetime

import pytest

from app.adapters.queues.infrai.api import InfraiError
from app.adapters.queues.infrai.publisher import InfraiPublisher
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.retry import BackoffPolicy
from tests.support.fake_infrai import Fault
from tests.support.infrai_fixtures import make_api

pytestmark = pytest.mark.anyio

PUBLISH = "/v1/queue/publish"
BATCH = "/v1/queue/publish_batch"
SEVEN_DAYS = 7 * 24 * 3600


def message(n: int = 1, *, queue: str = "reminders-email", delay: float = 0) -> OutgoingMessage:
    payload = {"v": 1, "reminder_id": f"r{n}", "channel": "email", "schedule_version": 1}
    return OutgoingMessage(queue, payload, delay, f"r{n}:email:v1")


@pytest.fixture
def publisher(fake_infrai, infrai_http, sleeps, clock) -> InfraiPublisher:
    fake_infrai.add_queue("reminders-email")
    fake_infrai.add_queue("reminders-webhook")
    return InfraiPublisher(make_api(infrai_http, fake_infrai.base_url, sleep=sleeps, now=clock))


def expected_backoff(attempts: int, seed: int = 7) -> list[float]:
    """The delays full jitter draws with the fixture's seeded random source."""
    rand, policy = random.Random(seed), BackoffPolicy(0.5, 8.0, 0.05)
    return [policy.delay(n, rand) for n in range(1, attempts + 1)]


async def test_publish_sends_the_documented_body_key_header_and_canonical_json(
    publisher, fake_infrai
):
    """One publish: bearer key, Idempotency-Key header = body key, sorted compact JSON + \\n."""
    message_id = await publisher.publish(message(delay=90))
    [call] = fake_infrai.calls_to(PUBLISH)
    assert call.headers["authorization"] == f"Bearer {fake_infrai.api_key}"
    assert call.headers["idempotency-key"] == "r1:email:v1"
    assert call.json == {
        "queue": "reminders-email",
        "payload": {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1},
        "delay_seconds": 90,
        "idempotency_key": "r1:email:v1",
    }
    assert call.raw.endswith(b"}\n") and b": " not in call.raw
    assert list(call.json) == sorted(call.json)
    [stored] = fake_infrai.queues["reminders-email"].messages
    assert stored.message_id == message_id


async def test_delay_is_rounded_up_and_beyond_seven_days_refused(publisher, fake_infrai):
    """10.2 s becomes 11 s (never early); 8 days is refused (clamping would deliver early)."""
    await publisher.publish(message(1, delay=10.2))
    await publisher.publish(message(2, delay=SEVEN_DAYS))
    with pytest.raises(PublishError):
        await publisher.publish(message(3, delay=8 * 24 * 3600))
    delays = [call.json["delay_seconds"] for call in fake_infrai.calls_to(PUBLISH)]
    assert delays == [11, SEVEN_DAYS]
    assert publisher.max_delay_seconds == SEVEN_DAYS


async def test_identical_republish_returns_the_same_message_id(publisher, fake_infrai):
    """Publishing the same key twice yields one stored message and one id."""
    first = await publisher.publish(message())
    second = await publisher.publish(message())
    assert first == second
    assert len(fake_infrai.queues["reminders-email"].messages) == 1


async def test_5xx_burst_is_retried_with_jittered_backoff(publisher, fake_infrai, sleeps):
    """Two 503s then success: three calls, the two sleeps drawn by full jitter."""
    fake_infrai.inject(PUBLISH, Fault(503), Fault(502))
    message_id = await publisher.publish(message())
    assert message_id.startswith("msg_")
    assert len(fake_infrai.calls_to(PUBLISH)) == 3
    assert sleeps.delays == pytest.approx(expected_backoff(2))
    assert all(0.05 <= d <= 8.0 for d in sleeps.delays)


async def test_retries_are_bounded(publisher, fake_infrai, sleeps):
    """Four 500s exhaust the four attempts: a PublishError naming the code, three sleeps."""
    fake_infrai.inject(PUBLISH, *[Fault(500, code="INTERNAL")] * 5)
    with pytest.raises(PublishError, match=r"HTTP 500 INTERNAL.*after 4 attempts"):
        await publisher.publish(message())
    assert len(fake_infrai.calls_to(PUBLISH)) == 4
    assert len(sleeps.delays) == 3


async def test_429_waits_exactly_retry_after_seconds(publisher, fake_infrai, sleeps):
    """Retry-After: 7 → one sleep of exactly 7 s, then success."""
    fake_infrai.inject(PUBLISH, Fault(429, retry_after="7", code="RATE_LIMITED"))
    await publisher.publish(message())
    assert sleeps.delays == [7.0]


async def test_429_with_an_http_date_waits_until_that_date(publisher, fake_infrai, sleeps, clock):
    """Retry-After as an HTTP date is measured against the injected clock."""
    when = format_datetime(clock.now + timedelta(seconds=12), usegmt=True)
    fake_infrai.inject(PUBLISH, Fault(429, retry_after=when))
    await publisher.publish(message())
    assert sleeps.delays == [12.0]


async def test_429_without_retry_after_uses_jittered_backoff(publisher, fake_infrai, sleeps):
    """No Retry-After: the same full-jitter backoff as a 5xx."""
    fake_infrai.inject(PUBLISH, Fault(429), Fault(429))
    await publisher.publish(message())
    assert sleeps.delays == pytest.approx(expected_backoff(2))


async def test_a_retry_after_beyond_the_cap_fails_at_once(publisher, fake_infrai, sleeps):
    """Retry-After 3600 is not slept through inside a sweep: a retryable error, no sleep."""
    fake_infrai.inject(PUBLISH, Fault(429, retry_after="3600", code="RATE_LIMITED"))
    with pytest.raises(InfraiError, match=r"RATE_LIMITED.*Retry-After 3600") as caught:
        await publisher.publish(message())
    assert caught.value.retryable
    assert sleeps.delays == []


async def test_transport_errors_are_retried_then_reported(infrai_http, sleeps, clock):
    """Nothing listening: every attempt fails to connect; a clear error after the last."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = make_api(infrai_http, f"http://127.0.0.1:{port}/v1", sleep=sleeps, now=clock)
    with pytest.raises(PublishError, match="ConnectError after 4 attempts"):
        await InfraiPublisher(api).publish(message())
    assert sleeps.delays == pytest.approx(expected_backoff(3))


async def test_401_names_the_code_and_the_hint_without_retrying(publisher, fake_infrai, sleeps):
    """A wrong key: UNAUTHORIZED with Infrai's hint, one call, and the key is not echoed."""
    fake_infrai.api_key = "ifr_other"
    with pytest.raises(PublishError) as caught:
        await publisher.publish(message())
    text = str(caught.value)
    assert "HTTP 401 UNAUTHORIZED" in text and "hint: Send Authorization" in text
    assert "request_id" in text and fake_infrai.api_key not in text
    assert len(fake_infrai.calls_to(PUBLISH)) == 1 and sleeps.delays == []


async def test_402_names_insufficient_credit(publisher, fake_infrai):
    """Out of credit: the documented INSUFFICIENT_CREDIT code and its hint."""
    fake_infrai.credit_exhausted = True
    with pytest.raises(PublishError, match=r"HTTP 402 INSUFFICIENT_CREDIT.*hint: Add credit"):
        await publisher.publish(message())


async def test_other_4xx_names_the_code(publisher, fake_infrai):
    """An unknown queue: QUEUE_NOT_FOUND, not retried."""
    with pytest.raises(PublishError, match="HTTP 404 QUEUE_NOT_FOUND"):
        await publisher.publish(message(queue="nope"))
    assert len(fake_infrai.calls_to(PUBLISH)) == 1


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        (b"<html>gateway</html>", "not JSON"),
        (b'{"message_id": "m1"}', "not an {ok, data, error} envelope"),
        (b'{"ok": true, "data": [1]}', "data is not an object"),
        (b'{"ok": true, "data": {}}', "message_id is missing"),
    ],
)
async def test_malformed_responses_are_clear_errors(publisher, fake_infrai, raw, what):
    """A 200 that is not a usable envelope fails with a message saying what is wrong."""
    fake_infrai.inject(PUBLISH, Fault(200, raw=raw))
    with pytest.raises(PublishError, match="malformed response") as caught:
        await publisher.publish(message())
    assert what in str(caught.value)


async def test_oversized_payload_is_refused_before_any_call(publisher, fake_infrai):
    """A payload over 256 KB never reaches Infrai."""
    big = OutgoingMessage("reminders-email", {"blob": "x" * (256 * 1024)}, 0, "big")
    with pytest.raises(PublishError, match="exceeds"):
        await publisher.publish(big)
    assert fake_infrai.calls == []


async def test_batch_publishes_in_one_call_with_ids_in_order(publisher, fake_infrai):
    """The batch route carries every message (any queues); ids come back in order."""
    messages = [message(1), message(2, queue="reminders-webhook"), message(3)]
    ids = await publisher.publish_batch(messages)
    [call] = fake_infrai.calls_to(BATCH)
    assert [item["idempotency_key"] for item in call.json["messages"]] == [
        m.idempotency_key for m in messages
    ]
    assert call.headers["idempotency-key"].startswith("batch:")
    stored = {
        m.message_id: m.payload["reminder_id"]
        for q in fake_infrai.queues.values()
        for m in q.messages
    }
    assert [stored[i] for i in ids] == ["r1", "r2", "r3"]
    assert await publisher.publish(message(2, queue="reminders-webhook")) == ids[1]


async def test_batch_per_queue_shape_and_chunking(fake_infrai, infrai_http, sleeps, clock):
    """per_queue: one call per queue and chunk, each carrying only that queue's messages."""
    fake_infrai.add_queue("a")
    fake_infrai.add_queue("b")
    api = make_api(infrai_http, fake_infrai.base_url, sleep=sleeps, now=clock)
    publisher = InfraiPublisher(api, batch_shape="per_queue", batch_max_messages=2)
    messages = [message(1, queue="a"), message(2, queue="b"), message(3, queue="a")]
    ids = await publisher.publish_batch(messages)
    bodies = [call.json for call in fake_infrai.calls_to(BATCH)]
    assert [(b["queue"], len(b["messages"])) for b in bodies] == [("a", 1), ("b", 1), ("a", 1)]
    assert len(set(ids)) == 3


async def test_batch_falls_back_to_single_publishes_when_the_route_is_missing(
    publisher, fake_infrai
):
    """Batch route 404: the messages go out one by one, and the route is not tried again."""
    fake_infrai.batch_enabled = False
    ids = await publisher.publish_batch([message(1), message(2)])
    assert len(set(ids)) == 2
    assert len(fake_infrai.calls_to(PUBLISH)) == 2
    assert publisher.batch_available is False
    await publisher.publish_batch([message(3)])
    assert len(fake_infrai.calls_to(BATCH)) == 1
    assert len(fake_infrai.calls_to(PUBLISH)) == 3


async def test_batch_falls_back_on_405_and_501(publisher, fake_infrai):
    """Method Not Allowed and Not Implemented also mean "no batch route here"."""
    fake_infrai.inject(BATCH, Fault(405, raw=b"Method Not Allowed"))
    assert len(await publisher.publish_batch([message(1)])) == 1
    publisher.batch_available = None
    fake_infrai.inject(BATCH, Fault(501))
    assert len(await publisher.publish_batch([message(2)])) == 1
    assert len(fake_infrai.calls_to(PUBLISH)) == 2


async def test_batch_other_errors_are_not_masked_by_the_fallback(publisher, fake_infrai):
    """A 402 on the batch route is raised as is, no single publishes attempted."""
    fake_infrai.credit_exhausted = True
    with pytest.raises(PublishError, match="INSUFFICIENT_CREDIT"):
        await publisher.publish_batch([message(1)])
    assert fake_infrai.calls_to(PUBLISH) == []
