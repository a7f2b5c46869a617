"""The webhook provider against a local receiver on a real socket (IPv4 and IPv6).

Signatures are checked with the ``standardwebhooks`` library's own verifier, independently
of our signing code. Loopback is allowlisted only where a test says so.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import aiohttp
import pytest
from pydantic import SecretStr
from standardwebhooks.webhooks import Webhook

from app.adapters.channels.http import MAX_RESPONSE_BYTES, SharedHttp, read_capped
from app.adapters.channels.ssrf import TargetPolicy
from app.adapters.channels.webhook import WebhookProvider
from app.domain.errors import (
    PermanentProviderError,
    RateLimitedError,
    TransientProviderError,
    WebhookGone,
)
from app.domain.messages import RenderedMessage
from tests.support.channel_servers import HANG, WebhookSink, serve

pytestmark = pytest.mark.anyio

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = "digest:cust_1:2026-W33:webhook:webhook"
LOOPBACK = TargetPolicy.from_entries(["127.0.0.0/8", "::1/128"])
NOW = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
BODY = {"type": "reminder.weekly_digest", "reminder_id": "digest:cust_1:2026-W33", "data": {}}


def hook(url: str) -> RenderedMessage:
    """A rendered webhook for ``url``."""
    return RenderedMessage("webhook", url, body=BODY)


@pytest.fixture
async def http():
    """The shared HTTP pool, closed after the test."""
    shared = SharedHttp()
    yield shared
    await shared.aclose()


@pytest.fixture
async def sink():
    """A webhook receiver on 127.0.0.1; yields (sink, base URL)."""
    receiver = WebhookSink()
    async with serve(receiver.app()) as base_url:
        yield receiver, base_url
        receiver.release.set()


def provider(http: SharedHttp, policy: TargetPolicy = LOOPBACK, **kwargs) -> WebhookProvider:
    """A webhook provider with a fixed clock."""
    return WebhookProvider(
        http, signing_secret=SecretStr(SECRET), policy=policy, clock=lambda: NOW, **kwargs
    )


async def test_signed_delivery_verifies_with_the_standard_webhooks_verifier(http, sink):
    """Headers and body verify with the library's verifier; webhook-id is the ledger key."""
    receiver, base_url = sink
    sent_at = datetime.now(UTC)  # the verifier checks the timestamp against the real clock
    wall_clock = provider(http)
    wall_clock.clock = lambda: sent_at
    await wall_clock.send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5)
    [request] = receiver.received
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert headers["webhook-id"] == KEY
    assert headers["webhook-timestamp"] == str(int(sent_at.timestamp()))
    assert Webhook(SECRET).verify(request["body"], headers) == BODY
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "QUJD" * 8).verify(request["body"], headers)


async def test_same_key_gives_the_same_webhook_id_on_every_attempt(http, sink):
    """A resend after an unknown outcome carries the same webhook-id for deduplication."""
    receiver, base_url = sink
    for _ in range(2):
        await provider(http).send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5)
    ids = [r["headers"]["webhook-id"] for r in receiver.received]
    assert ids == [KEY, KEY]


async def test_connects_to_the_vetted_address_with_the_original_host(http, sink):
    """A DNS name is resolved once by us; the request goes to that IP with Host preserved."""
    receiver, base_url = sink
    port = base_url.rsplit(":", 1)[1]
    asked: list[str] = []

    async def resolver(host: str, _port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    policy = TargetPolicy.from_entries(["127.0.0.0/8"])
    url = f"http://hooks.customer.test:{port}/hook"  # no real DNS knows this name
    await provider(http, policy, resolver=resolver).send(hook(url), idempotency_key=KEY, timeout=5)
    assert asked == ["hooks.customer.test"]
    assert receiver.received[0]["host"] == f"hooks.customer.test:{port}"


async def test_loopback_is_refused_without_the_allowlist(http, sink):
    """The same local server is refused when loopback is not allowlisted; nothing is sent."""
    receiver, base_url = sink
    with pytest.raises(PermanentProviderError) as caught:
        await provider(http, TargetPolicy()).send(
            hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5
        )
    assert caught.value.detail_class == "ssrf_refused"
    assert receiver.received == []


async def test_name_resolving_to_loopback_is_refused(http, sink):
    """A DNS name whose answer is private never gets a connection."""
    receiver, base_url = sink
    port = base_url.rsplit(":", 1)[1]

    async def resolver(host: str, _port: int) -> list[str]:
        return ["127.0.0.1"]

    with pytest.raises(PermanentProviderError) as caught:
        await provider(http, TargetPolicy(), resolver=resolver).send(
            hook(f"http://evil.example:{port}/hook"), idempotency_key=KEY, timeout=5
        )
    assert caught.value.detail_class == "ssrf_refused"
    assert receiver.received == []


async def test_ipv6_loopback_refused_then_allowed_by_cidr(http):
    """An IPv6 target: refused by default, delivered when ::1/128 is allowlisted."""
    receiver = WebhookSink()
    async with serve(receiver.app(), host="::1") as base_url:
        with pytest.raises(PermanentProviderError) as caught:
            await provider(http, TargetPolicy()).send(
                hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5
            )
        assert caught.value.detail_class == "ssrf_refused"
        allowed = TargetPolicy.from_entries(["::1/128"])
        await provider(http, allowed).send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5)
    assert len(receiver.received) == 1


async def test_redirects_are_not_followed(http, sink):
    """A 3xx (here towards the metadata address) is a permanent ``redirect_refused``."""
    receiver, base_url = sink
    with pytest.raises(PermanentProviderError) as caught:
        await provider(http).send(hook(f"{base_url}/moved"), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "redirect_refused"
    assert receiver.received == []


@pytest.mark.parametrize(
    ("status", "headers", "expected", "detail_class"),
    [
        (410, {}, WebhookGone, "webhook_gone"),
        (429, {"Retry-After": "30"}, RateLimitedError, "rate_limited"),
        (500, {}, TransientProviderError, "webhook_5xx"),
        (503, {}, TransientProviderError, "webhook_5xx"),
        (408, {}, TransientProviderError, "webhook_4xx"),
        (400, {}, PermanentProviderError, "webhook_4xx"),
        (404, {}, PermanentProviderError, "webhook_4xx"),
    ],
)
async def test_status_codes_are_classified(http, sink, status, headers, expected, detail_class):
    """410 gone, 429 rate limited, 408/5xx transient, other 4xx permanent."""
    receiver, base_url = sink
    receiver.script = [(status, headers)]
    with pytest.raises(expected) as caught:
        await provider(http).send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5)
    assert type(caught.value) is expected
    assert caught.value.detail_class == detail_class
    if status == 429:
        assert caught.value.retry_after == 30.0


async def test_hanging_endpoint_is_unknown_outcome(http, sink):
    """No answer within the timeout after the request went out: ``unknown_outcome``."""
    receiver, base_url = sink
    receiver.script = [HANG]
    with pytest.raises(TransientProviderError) as caught:
        await provider(http).send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=0.4)
    assert caught.value.detail_class == "unknown_outcome"
    assert len(receiver.received) == 1


async def test_response_bodies_are_read_up_to_a_cap(http, sink):
    """A 16 MiB answer is read only up to the cap."""
    _, base_url = sink
    async with http.session().post(f"{base_url}/huge", timeout=aiohttp.ClientTimeout(5)) as resp:
        body = await read_capped(resp)
    assert len(body) == MAX_RESPONSE_BYTES


async def test_body_is_the_rendered_json(http, sink):
    """The POSTed body is exactly the rendered JSON."""
    receiver, base_url = sink
    await provider(http).send(hook(f"{base_url}/hook"), idempotency_key=KEY, timeout=5)
    assert json.loads(receiver.received[0]["body"]) == BODY
    assert receiver.received[0]["headers"]["Content-Type"] == "application/json"


async def test_a_hanging_resolver_counts_against_the_timeout(http):
    """DNS is inside the send's deadline: a resolver that never answers is ``dns_error``."""

    async def never(host: str, port: int) -> list[str]:
        await asyncio.Event().wait()
        return []

    with pytest.raises(TransientProviderError) as caught:
        await provider(http, resolver=never).send(
            hook("https://hooks.example/in"), idempotency_key=KEY, timeout=0.3
        )
    assert caught.value.detail_class == "dns_error"
