"""/push/{queue} uses the format of the queue it names: kinds chosen per channel in settings."""

from __future__ import annotations

import dataclasses
import time

import httpx
import orjson
import pytest

from app.container import build_container
from app.main import create_app
from tests.conftest import make_settings
from tests.support.flow import put_customer, put_reminder
from tests.support.push import envelope, signed
from tests.support.qstash import CURRENT_KEY, NEXT_KEY, push_headers

pytestmark = pytest.mark.anyio

PUBLIC = "https://reminders.example.com"


@pytest.fixture
async def client(clean_database_url, tmp_path, clock, rand, provider, publisher):
    """Email through the embedded queue ("reminders"), webhooks through QStash ("hooks")."""
    settings = make_settings(
        clean_database_url, tmp_path, webhook_queue="hooks", webhook_queue_kind="qstash",
        public_base_url=PUBLIC,
        qstash={"token": "qstash-token-0123456789", "current_signing_key": CURRENT_KEY,
                "next_signing_key": NEXT_KEY},
    )  # fmt: skip
    container = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    container.receiver = dataclasses.replace(
        container.receiver, providers={"email": provider, "webhook": provider}
    )
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http
    await container.aclose()


async def test_each_queue_answers_with_its_own_format(client, clock, provider):
    """QStash's JWT on its queue, our HMAC on the embedded one, and not the other way round."""
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    await put_reminder(
        client, "r1", customer_id="c1", due_at=clock.now, channels=("email", "webhook")
    )
    payload = {"v": 1, "reminder_id": "r1", "channel": "webhook", "schedule_version": 1}
    raw = orjson.dumps(payload)
    qstash = push_headers(raw, issued_at=time.time(), sub=f"{PUBLIC}/push/hooks")
    on_hooks = await client.post("/push/hooks", content=raw, headers=qstash)
    assert (on_hooks.status_code, on_hooks.json()["outcome"]) == (200, "sent")
    infrai_raw, infrai_headers = signed(envelope("r1", "email"))
    assert (
        await client.post("/push/hooks", content=infrai_raw, headers=infrai_headers)
    ).status_code == 401
    assert (await client.post("/push/reminders", content=raw, headers=qstash)).status_code == 401
    on_reminders = await client.post("/push/reminders", content=infrai_raw, headers=infrai_headers)
    assert on_reminders.json()["outcome"] == "sent"
    assert (await client.post("/push/other", content=raw, headers=qstash)).status_code == 404
    assert sorted(call.message.channel for call in provider.calls) == ["email", "webhook"]


async def test_a_qstash_token_for_another_queue_url_is_refused(client):
    """``sub`` names one queue's URL: a token minted for /push/reminders fails on /push/hooks."""
    raw = orjson.dumps({"v": 1})
    headers = push_headers(raw, issued_at=time.time(), sub=f"{PUBLIC}/push/reminders")
    answer = await client.post("/push/hooks", content=raw, headers=headers)
    assert answer.status_code == 401
