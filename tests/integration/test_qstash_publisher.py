"""The QStash publisher's requests, as a loopback server speaking the documented API sees them."""

from __future__ import annotations

import orjson
import pytest
from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.qstash.publisher import QStashPublisher
from app.domain.errors import PublishError
from app.domain.messages import DeliveryPayload, OutgoingMessage
from tests.support.fake_qstash import FREE_PLAN_DELAY, TOKEN, FakeQStash

pytestmark = pytest.mark.anyio

PUSH = "https://reminders.example.com/push/"


@pytest.fixture
async def fake(clock):
    server = FakeQStash(clock)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def http():
    shared = SharedHttp()
    yield shared
    await shared.aclose()


def publisher(http, fake, clock, token=TOKEN, **options) -> QStashPublisher:
    options.setdefault("max_delay_seconds", FREE_PLAN_DELAY)
    return QStashPublisher(
        http, base_url=fake.base_url, token=SecretStr(token),
        push_url_for=lambda queue: PUSH + queue, clock=clock, **options,
    )  # fmt: skip


def message(delay: float) -> OutgoingMessage:
    payload = DeliveryPayload("r1", "email", 2).to_json()
    return OutgoingMessage("reminders-email", payload, delay, "r1:email:v2")


async def test_the_request_carries_the_documented_headers_and_our_raw_payload(http, fake, clock):
    """Destination = our push URL in the path; Not-Before in unix seconds rounded up;
    the idempotency key as the deduplication id; the retries setting; the payload as JSON."""
    await publisher(http, fake, clock, retries=5).publish(message(90.5))
    [sent] = fake.messages
    assert sent.destination == PUSH + "reminders-email"
    assert sent.not_before == int(clock.now.timestamp()) + 91
    assert sent.headers["Upstash-Deduplication-Id"] == "r1:email:v2"
    assert sent.headers["Upstash-Retries"] == "5"
    assert sent.headers["Content-Type"] == "application/json"
    assert orjson.loads(sent.body) == DeliveryPayload("r1", "email", 2).to_json()


async def test_an_immediate_message_has_no_not_before(http, fake, clock):
    """Delay 0 (overdue or catch-up): QStash delivers at once."""
    await publisher(http, fake, clock).publish(message(0))
    assert fake.messages[0].not_before is None
    assert "Upstash-Not-Before" not in fake.messages[0].headers


async def test_a_refused_token_is_a_publish_error(http, fake, clock):
    """A 401 from QStash stops the sweep's batch with a PublishError."""
    with pytest.raises(PublishError, match="401"):
        await publisher(http, fake, clock, token="wrong").publish(message(0))


async def test_the_configured_max_delay_bounds_the_horizon(http, fake, clock):
    """A paid plan's longer delay is a setting; above it nothing is published."""
    longer = publisher(http, fake, clock, max_delay_seconds=30 * 86400.0)
    await longer.publish(message(20 * 86400.0))
    with pytest.raises(PublishError):
        await publisher(http, fake, clock).publish(message(8 * 86400.0))
    assert len(fake.messages) == 1
