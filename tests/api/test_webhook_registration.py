"""A webhook_url the SSRF guard would refuse at send time is refused at registration: a 422
naming REMINDERS_WEBHOOK_ALLOWED_TARGETS on the customer PUT and per item in the batch,
instead of a 200 now and an ``ssrf_refused`` terminal failure on every send later."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from app.container import build_container
from app.main import create_app
from tests.conftest import make_settings
from tests.support.flow import API

pytestmark = pytest.mark.anyio

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def app_client(database_url: str, tmp_path: Path, clock, **overrides):
    """The service with the real webhook provider (and its guard) behind the API."""
    settings = make_settings(
        database_url,
        tmp_path,
        webhook_provider="webhook",
        webhook_signing_secret=SecretStr(SECRET),
        **overrides,
    )
    container = build_container(settings, clock=clock)
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    return container, httpx.AsyncClient(transport=transport, base_url="http://testserver")


@pytest.fixture
async def guarded(clean_database_url, tmp_path, clock):
    container, client = await app_client(clean_database_url, tmp_path, clock)
    async with client:
        yield client
    await container.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9100/hook",
        "http://localhost:9100/hook",  # a name: resolved, and it resolves to loopback
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:127.0.0.1]/hook",
    ],
)
async def test_a_put_with_a_refused_target_is_422_naming_the_setting(guarded, url):
    """Loopback, private, metadata and mapped addresses: 422 on webhook_url, nothing stored."""
    response = await guarded.put("/v1/customers/c1", json={"webhook_url": url}, headers=API)
    assert response.status_code == 422, response.text
    body = response.json()
    [field] = body["fields"]
    assert field["field"] == "webhook_url"
    assert "REMINDERS_WEBHOOK_ALLOWED_TARGETS" in field["message"]
    assert (await guarded.get("/v1/customers/c1", headers=API)).status_code == 404


async def test_a_public_address_is_accepted(guarded):
    """A public target (an address literal: no DNS needed) registers as before."""
    response = await guarded.put(
        "/v1/customers/c1", json={"webhook_url": "https://93.184.215.14/hook"}, headers=API
    )
    assert response.status_code == 200, response.text


async def test_a_batch_refuses_only_the_unreachable_items(guarded):
    """Each refused item is an error at its own position; the others are stored."""
    items = [
        {"id": "ok1", "webhook_url": "https://93.184.215.14/a"},
        {"id": "bad", "webhook_url": "http://127.0.0.1:9100/hook"},
        {"id": "invalid", "webhook_url": "not a url"},
        {"id": "ok2", "email": "a@example.com"},
    ]
    response = await guarded.post("/v1/customers:batch", json={"items": items}, headers=API)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [(r["id"], r["status"]) for r in results] == [
        ("ok1", "created"),
        ("bad", "error"),
        ("invalid", "error"),
        ("ok2", "created"),
    ]
    [field] = results[1]["fields"]
    assert field["field"] == "webhook_url"
    assert "REMINDERS_WEBHOOK_ALLOWED_TARGETS" in field["message"]


async def test_an_allowlisted_target_is_accepted(clean_database_url, tmp_path, clock):
    """REMINDERS_WEBHOOK_ALLOWED_TARGETS lets a private target register, as it lets it send."""
    container, client = await app_client(
        clean_database_url, tmp_path, clock, webhook_allowed_targets=["127.0.0.0/8"]
    )
    async with client:
        response = await client.put(
            "/v1/customers/c1", json={"webhook_url": "http://127.0.0.1:9100/hook"}, headers=API
        )
    await container.aclose()
    assert response.status_code == 200, response.text


async def test_with_the_outbox_as_webhook_provider_any_url_registers(client):
    """No guard sends (the outbox writes files), so no URL is undeliverable."""
    response = await client.put(
        "/v1/customers/c1", json={"webhook_url": "http://127.0.0.1:9100/hook"}, headers=API
    )
    assert response.status_code == 200, response.text
