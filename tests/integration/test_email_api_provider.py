"""The email API provider against a local Resend-shaped HTTP server on a real socket."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from app.adapters.channels.email_api import EmailApiProvider
from app.adapters.channels.http import SharedHttp
from app.domain.errors import PermanentProviderError, RateLimitedError, TransientProviderError
from app.domain.messages import RenderedMessage
from tests.support.channel_servers import HANG, FakeEmailApi, free_port, serve

pytestmark = pytest.mark.anyio

API_KEY = "re_test_key_0123456789"
KEY = "renewal:cust_9:email:email_api"


def email(**overrides: object) -> RenderedMessage:
    """A rendered email."""
    values: dict = {
        "channel": "email",
        "recipient": "grace@example.com",
        "subject": "Your plan renews soon",
        "text": "Hello Grace",
        "html": "<p>Hello Grace</p>",
        "headers": {"List-Unsubscribe": "<https://relay.example/unsubscribe/t>"},
    }
    values.update(overrides)
    return RenderedMessage(**values)


@pytest.fixture
async def api():
    """A running fake email API and a provider pointed at it (sharing one HTTP pool)."""
    fake = FakeEmailApi(api_key=API_KEY)
    http = SharedHttp()
    async with serve(fake.app()) as base_url:
        provider = EmailApiProvider(
            http, base_url=base_url, api_key=SecretStr(API_KEY), sender="r@relay.example"
        )
        yield fake, provider
        fake.release.set()
    await http.aclose()


async def test_sends_json_with_bearer_key_and_idempotency_key(api):
    """One POST: bearer key, the ledger key as Idempotency-Key, the provider's id returned."""
    fake, provider = api
    result = await provider.send(email(), idempotency_key=KEY, timeout=5)
    [request] = fake.requests
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert request["headers"]["Idempotency-Key"] == KEY
    body = json.loads(request["body"])
    assert body["to"] == ["grace@example.com"]
    assert body["from"] == "r@relay.example"
    assert body["html"] == "<p>Hello Grace</p>"
    assert body["headers"]["List-Unsubscribe"] == "<https://relay.example/unsubscribe/t>"
    assert result.provider_request_id is not None
    assert len(fake.delivered) == 1


async def test_unknown_outcome_then_retry_is_absorbed_by_the_idempotency_key(api):
    """The provider accepted but we timed out: the retry gets the same id and no second email."""
    fake, provider = api
    fake.script = ["accept_then_hang"]
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=0.5)
    assert caught.value.detail_class == "unknown_outcome"
    result = await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert len(fake.delivered) == 1
    assert len(fake.requests) == 2
    assert result.provider_request_id == fake._keys[KEY][1]["id"]


async def test_timeout_before_any_answer_is_unknown_outcome(api):
    """A server that never answers: transient ``unknown_outcome`` within the deadline."""
    fake, provider = api
    fake.script = [HANG]
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=0.4)
    assert caught.value.detail_class == "unknown_outcome"


async def test_same_key_with_another_payload_is_a_permanent_conflict(api):
    """The provider refuses a reused key with a different body (409): permanent."""
    _, provider = api
    await provider.send(email(), idempotency_key=KEY, timeout=5)
    with pytest.raises(PermanentProviderError) as caught:
        await provider.send(email(subject="changed"), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "idempotency_conflict"


async def test_concurrent_request_with_the_same_key_is_transient(api):
    """409 concurrent_idempotent_requests means "still in progress": retry later."""
    fake, provider = api
    fake.script = [(409, {"name": "concurrent_idempotent_requests"}, {})]
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "idempotency_in_progress"


async def test_429_is_rate_limited_with_retry_after(api):
    """429 carries the provider's Retry-After seconds."""
    fake, provider = api
    fake.script = [(429, {"name": "rate_limit_exceeded"}, {"Retry-After": "7"})]
    with pytest.raises(RateLimitedError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert caught.value.retry_after == 7.0
    assert caught.value.detail_class == "rate_limited"


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_is_transient(api, status):
    """Provider-side failures are retried."""
    fake, provider = api
    fake.script = [(status, {"name": "internal_server_error"}, {})]
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert type(caught.value) is TransientProviderError
    assert caught.value.detail_class == "provider_5xx"


async def test_validation_error_is_permanent(api):
    """422 from the provider's own validation (here: no recipient list) is permanent."""
    _, provider = api
    with pytest.raises(PermanentProviderError) as caught:
        await provider.send(email(subject=""), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "provider_rejected"
    assert "422 (validation_error)" in str(caught.value)


async def test_400_is_permanent(api):
    """400 is permanent."""
    fake, provider = api
    fake.script = [(400, {"name": "invalid_parameter"}, {})]
    with pytest.raises(PermanentProviderError):
        await provider.send(email(), idempotency_key=KEY, timeout=5)


@pytest.mark.parametrize(("key", "status"), [("", 401), ("re_rotated_old_key", 403)])
async def test_auth_failures_are_transient_provider_auth(api, key, status):
    """A missing or rotated key is our configuration fault: transient ``provider_auth``."""
    fake, provider = api
    provider._api_key = SecretStr(key)
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "provider_auth"
    assert f"answered {status}" in str(caught.value)
    assert fake.delivered == []


async def test_unreachable_api_is_transient_connect_error():
    """Nothing listening: transient, and known not to have been sent."""
    http = SharedHttp()
    provider = EmailApiProvider(
        http,
        base_url=f"http://127.0.0.1:{free_port()}",
        api_key=SecretStr(API_KEY),
        sender="r@relay.example",
    )
    try:
        with pytest.raises(TransientProviderError) as caught:
            await provider.send(email(), idempotency_key=KEY, timeout=2)
    finally:
        await http.aclose()
    assert caught.value.detail_class == "connect_error"
