"""SNS and QStash give up on a message; the sweep's catch-up still ends in exactly one send.

SNS: the publisher talks to moto's SNS server; the push is the republished message signed
as SNS signs it (certificate over HTTPS on loopback). QStash: the publisher talks to a
loopback server speaking the documented publish API; the push carries a minted
``Upstash-Signature``. The message "dropped by the queue" is simply never pushed.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import orjson
import pytest
from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.qstash.publisher import QStashPublisher
from app.adapters.queues.qstash.push_format import QStashPushFormat
from app.adapters.queues.sns.publisher import SnsPublisher
from app.adapters.queues.sns.push_format import CertificateStore, SnsPushFormat
from tests.support.aws_fixtures import CREDENTIALS, REGION
from tests.support.fake_qstash import FREE_PLAN_DELAY, TOKEN, FakeQStash
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.qstash import CURRENT_KEY, NEXT_KEY, push_headers
from tests.support.sns import TOPIC_ARN, SnsHost, body, client_ssl

pytestmark = pytest.mark.anyio

PUBLIC = "https://reminders.example.com"


@pytest.fixture
async def http():
    shared = SharedHttp()
    yield shared
    await shared.aclose()


async def lose_the_first_message_then_catch_up(client, clock, held) -> list:
    """Sweep a due reminder, let its message vanish, sweep again past the margin."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    assert (await sweep(client))["enqueued"] == 1
    clock.advance(minutes=31)
    assert (await sweep(client))["republished"] == 1
    messages = await held()
    assert len(messages) == 2
    return messages


async def test_sns_dropped_message_ends_in_one_send(client, container, clock, provider, moto, http):
    """Published to moto, never pushed; republished; the signed push of the new one sends."""
    topic = moto.create_topic("reminders")
    assert topic == TOPIC_ARN
    host = SnsHost()
    await host.start()
    container.publisher = SnsPublisher(
        {"reminders": topic}, region=REGION, endpoint_url=moto.endpoint_url,
        client_options=CREDENTIALS,
    )  # fmt: skip
    store = CertificateStore(http, host_pattern="localhost", ssl=client_ssl())
    container.push_formats = {"reminders": SnsPushFormat([topic], store, http)}

    async def held():
        return moto.sent("reminders")

    try:
        lost, again = await lose_the_first_message_then_catch_up(client, clock, held)

        async def push(sent) -> dict:
            payload = json.loads(sent[1])
            signed = host.notification(payload, at=datetime.now(UTC), MessageId=sent[0])
            headers = {"content-type": "text/plain; charset=UTF-8"}
            return (
                await client.post("/push/reminders", content=body(signed), headers=headers)
            ).json()

        assert (await push(again))["outcome"] == "sent"
        assert (await push(lost))["outcome"] == "duplicate"  # it was only late after all
        assert len(provider.calls) == 1
    finally:
        await container.publisher.aclose()
        await host.stop()


async def test_qstash_dropped_message_ends_in_one_send(client, container, clock, provider, http):
    """Published to QStash, never pushed; republished under a new deduplication id; sent once."""
    fake = FakeQStash(clock)
    await fake.start()
    container.publisher = QStashPublisher(
        http, base_url=fake.base_url, token=SecretStr(TOKEN),
        push_url_for=lambda queue: f"{PUBLIC}/push/{queue}",
        max_delay_seconds=FREE_PLAN_DELAY, clock=clock,
    )  # fmt: skip
    keys = [CURRENT_KEY.encode(), NEXT_KEY.encode()]
    container.push_formats = {
        "reminders": QStashPushFormat(keys, push_url=f"{PUBLIC}/push/reminders")
    }

    async def held():
        return list(fake.messages)

    try:
        lost, again = await lose_the_first_message_then_catch_up(client, clock, held)
        ids = [m.headers["Upstash-Deduplication-Id"] for m in (lost, again)]
        assert ids[0] == "r1:email:v1" and ids[1].startswith("r1:email:v1:catchup:")

        async def push(message) -> dict:
            headers = push_headers(
                message.body, issued_at=time.time(), message_id=message.message_id
            )
            return (
                await client.post("/push/reminders", content=message.body, headers=headers)
            ).json()

        assert (await push(again))["outcome"] == "sent"
        assert (await push(lost))["outcome"] == "duplicate"
        assert orjson.loads(again.body)["reminder_id"] == "r1"
        assert len(provider.calls) == 1
    finally:
        await fake.stop()


@pytest.fixture
async def sns_app(container, http):
    """The app with the SNS push format on queue ``reminders``."""
    host = SnsHost()
    await host.start()
    store = CertificateStore(http, host_pattern="localhost", ssl=client_ssl())
    container.push_formats = {"reminders": SnsPushFormat([TOPIC_ARN], store, http)}
    yield host
    await host.stop()


async def post_sns(client, message: dict):
    headers = {"content-type": "text/plain; charset=UTF-8"}
    return await client.post("/push/reminders", content=body(message), headers=headers)


async def test_sns_subscription_is_confirmed_through_the_push_route(client, sns_app):
    """A SubscriptionConfirmation of our topic: one GET of SubscribeURL, answered 200."""
    answer = await post_sns(client, sns_app.confirmation(at=datetime.now(UTC)))
    assert answer.status_code == 200
    assert answer.json() == {"outcome": "control", "ack": True, "detail": "subscription confirmed"}
    assert len(sns_app.confirmations) == 1


async def test_sns_nacks_are_always_5xx(client, clock, provider, sns_app):
    """SNS drops a message on any 4xx: a retry answer is 503, and so is a certificate we
    cannot fetch; only an inauthentic push gets 401."""
    from app.domain.errors import TransientProviderError

    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
    provider.script.append(TransientProviderError("provider down"))
    retry = await post_sns(client, sns_app.notification(payload, at=datetime.now(UTC)))
    assert (retry.status_code, retry.json()["outcome"]) == (503, "retry")
    assert int(retry.headers["retry-after"]) >= 1
    forged = {**sns_app.notification(payload, at=datetime.now(UTC)), "Message": "{}"}
    assert (await post_sns(client, forged)).status_code == 401
    await sns_app.stop()  # the certificate host is gone, and this URL was never fetched
    unsigned = dict(sns_app.notification(payload, at=datetime.now(UTC)))
    del unsigned["Signature"]
    other_url = sns_app.cert_url.replace(".pem", "-rotated.pem")
    unavailable = await post_sns(client, sns_app.sign(unsigned, cert_url=other_url))
    assert unavailable.status_code == 503
    assert unavailable.json()["error"] == "authentication_unavailable"
