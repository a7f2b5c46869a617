"""Channel behaviour through the whole service: one-click unsubscribe, 410 Gone, templates."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from pydantic import SecretStr

from app.container import build_container
from app.domain.unsubscribe import UnsubscribeLinks
from app.main import create_app
from tests.conftest import make_settings
from tests.support.channel_servers import WebhookSink, serve
from tests.support.flow import API, get_reminder, push_message, put_customer, put_reminder, sweep
from tests.support.providers import ScriptedProvider

pytestmark = pytest.mark.anyio

WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
async def channel_app(clean_database_url, tmp_path: Path, clock, rand, publisher):
    """The service with unsubscribe links and the real webhook provider (loopback allowed)."""
    settings = make_settings(
        clean_database_url,
        tmp_path,
        public_base_url="https://relay.example",
        unsubscribe_secret=SecretStr("test-unsubscribe-secret-7c1e9a3f5b2d8046"),
        webhook_provider="webhook",
        webhook_signing_secret=SecretStr(WEBHOOK_SECRET),
        webhook_allowed_targets=["127.0.0.0/8"],
    )
    container = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    email = ScriptedProvider(name="scripted")
    providers = {"email": email, "webhook": container.receiver.providers["webhook"]}
    container.receiver = dataclasses.replace(container.receiver, providers=providers)
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client, email
    await container.http.aclose()
    await container.engine.dispose()


@pytest.fixture
def container_links():
    """Unsubscribe links as channel_app's service issues them."""
    return UnsubscribeLinks("https://relay.example", b"test-unsubscribe-secret-7c1e9a3f5b2d8046")


async def deliver(client, publisher) -> list[dict]:
    """Sweep, then push every published message once; the answers in order."""
    await sweep(client)
    return [(await push_message(client, m)).json() for m in publisher.drain()]


async def test_one_click_unsubscribe_suppresses_the_next_email(channel_app, clock, publisher):
    """The List-Unsubscribe URL opts the customer out by POST; the next email is suppressed."""
    client, email = channel_app
    await put_customer(client, "cust_1")
    await put_reminder(client, "digest:cust_1:w33", customer_id="cust_1", due_at=clock.now)
    assert [a["outcome"] for a in await deliver(client, publisher)] == ["sent"]
    headers = email.calls[0].message.headers
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    url = headers["List-Unsubscribe"].strip("<>")
    assert url.startswith("https://relay.example/unsubscribe/")
    assert url in email.calls[0].message.text  # the template shows it too
    path = urlsplit(url).path

    page = await client.get(path)
    assert page.status_code == 200 and 'method="post"' in page.text
    customer = (await client.get("/v1/customers/cust_1", headers=API)).json()
    assert customer["opted_out_channels"] == []  # a GET (link preview) changes nothing

    form = {"List-Unsubscribe": "One-Click"}
    assert (await client.post(path, data=form)).status_code == 200
    assert (await client.post(path, data=form)).status_code == 200  # idempotent
    customer = (await client.get("/v1/customers/cust_1", headers=API)).json()
    assert customer["opted_out_channels"] == ["email"]

    await put_reminder(client, "digest:cust_1:w34", customer_id="cust_1", due_at=clock.now)
    assert [a["outcome"] for a in await deliver(client, publisher)] == ["suppressed"]
    assert len(email.calls) == 1


async def test_an_application_put_does_not_undo_a_recipients_unsubscribe(
    channel_app, clock, publisher, container_links
):
    """The recipient's unsubscribe is recorded apart and survives customer PUTs; only the
    documented re-subscribe clears it."""
    client, _ = channel_app
    await put_customer(client, "cA")
    path = urlsplit(container_links.url_for("cA", "email")).path
    clock.advance(minutes=5)
    assert (await client.post(path, data={"List-Unsubscribe": "One-Click"})).status_code == 200

    after = await put_customer(client, "cA", email="a@example.com")  # the application's PUT
    assert after["opted_out_channels"] == ["email"]
    assert after["recipient_unsubscribes"] == [
        {
            "channel": "email",
            "unsubscribed_at": "2026-08-10T09:05:00+00:00",
            "method": "unsubscribe_link",
        }
    ]
    await put_reminder(client, "r-after-put", customer_id="cA", due_at=clock.now)
    assert [a["outcome"] for a in await deliver(client, publisher)] == ["suppressed"]

    again = await client.delete("/v1/customers/cA/unsubscribes/email", headers=API)
    assert again.status_code == 200, again.text
    assert again.json()["opted_out_channels"] == []
    assert again.json()["recipient_unsubscribes"] == []
    await put_reminder(client, "r-after-resubscribe", customer_id="cA", due_at=clock.now)
    assert [a["outcome"] for a in await deliver(client, publisher)] == ["sent"]


@pytest.mark.parametrize(
    "token",
    ["garbage", "Y3VzdF8xCmVtYWls.AAAAAAAAAAAAAAAAAAAAAA", "Y3VzdF8xCmVtYWls", "%00.%00"],
)
async def test_forged_unsubscribe_tokens_are_404(channel_app, token):
    """A token not signed with our secret changes nothing and reveals nothing."""
    client, _ = channel_app
    await put_customer(client, "cust_1")
    assert (await client.post(f"/unsubscribe/{token}")).status_code == 404
    assert (await client.get(f"/unsubscribe/{token}")).status_code == 404
    customer = (await client.get("/v1/customers/cust_1", headers=API)).json()
    assert customer["opted_out_channels"] == []


async def test_410_gone_disables_the_webhook_until_the_url_changes(channel_app, clock, publisher):
    """410 → terminal and the channel disabled; later webhooks are suppressed; a new URL heals."""
    client, _ = channel_app
    sink = WebhookSink(script=[(410, {})])
    async with serve(sink.app()) as base_url:
        await put_customer(client, "cust_2", webhook_url=f"{base_url}/hook")
        await put_reminder(
            client, "renew:cust_2:1", customer_id="cust_2", due_at=clock.now, channels=("webhook",)
        )
        [answer] = await deliver(client, publisher)
        assert answer["outcome"] == "terminal"
        record = (await get_reminder(client, "renew:cust_2:1"))["send_records"][0]
        assert record["last_error_class"] == "webhook_gone"
        customer = (await client.get("/v1/customers/cust_2", headers=API)).json()
        assert customer["webhook_disabled_at"] is not None

        await put_reminder(
            client, "renew:cust_2:2", customer_id="cust_2", due_at=clock.now, channels=("webhook",)
        )
        assert [a["outcome"] for a in await deliver(client, publisher)] == ["suppressed"]
        assert len(sink.received) == 1

        await put_customer(client, "cust_2", webhook_url=f"{base_url}/hook?v=2")
        await put_reminder(
            client, "renew:cust_2:3", customer_id="cust_2", due_at=clock.now, channels=("webhook",)
        )
        assert [a["outcome"] for a in await deliver(client, publisher)] == ["sent"]
        assert len(sink.received) == 2


async def test_template_failing_at_send_time_is_terminal(channel_app, clock, publisher):
    """A template that cannot render this reminder's data ends terminal, with no retry loop."""
    client, email = channel_app
    await put_customer(client, "cust_3")
    await put_reminder(
        client, "digest:cust_3:w1", customer_id="cust_3", due_at=clock.now, data={"items": 5}
    )
    [answer] = await deliver(client, publisher)
    assert answer["outcome"] == "terminal"  # iterating over an int fails in the template
    record = (await get_reminder(client, "digest:cust_3:w1"))["send_records"][0]
    assert record["last_error_class"] == "template_error"
    assert record["state"] == "terminal_failure"
    assert email.calls == []
