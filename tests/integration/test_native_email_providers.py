"""Postmark and SendGrid providers against loopback servers answering as documented."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp
from app.adapters.channels.postmark import PostmarkProvider
from app.adapters.channels.sendgrid import SendGridProvider
from app.domain.errors import PermanentProviderError, RateLimitedError, TransientProviderError
from app.domain.messages import RenderedMessage
from tests.support.channel_servers import serve
from tests.support.native_email_apis import ACCEPT_THEN_HANG, FakeNativeApi

KEY = "r1:email:native"
MESSAGE = RenderedMessage(
    channel="email", recipient="ann@example.com", subject="Hi", text="Hello", html="<p>Hello</p>",
    headers={"List-Unsubscribe": "<https://x.example/u/1>"},
)  # fmt: skip


@pytest.fixture(params=["postmark", "sendgrid"])
async def api(request):
    """A running fake of one provider and a provider object pointed at it."""
    fake = FakeNativeApi(request.param, credential="right-credential")
    http = SharedHttp()
    async with serve(fake.app()) as url:
        yield fake, _provider(request.param, http, url, "right-credential")
    fake.release.set()
    await http.aclose()


def _provider(kind: str, http: SharedHttp, url: str, credential: str):
    if kind == "postmark":
        return PostmarkProvider(
            http, server_token=SecretStr(credential), sender="r@example.com", base_url=url
        )
    return SendGridProvider(
        http, api_key=SecretStr(credential), sender="r@example.com", base_url=url
    )


async def test_an_accepted_message_returns_the_providers_message_id(api):
    """The provider's message id (Postmark MessageID, SendGrid X-Message-Id) is returned,
    and the body carries the recipient, both parts and our headers."""
    fake, provider = api
    result = await provider.send(MESSAGE, idempotency_key=KEY, timeout=5)
    assert result.provider_request_id
    [body] = fake.accepted
    text = str(body)
    assert "ann@example.com" in text and "<p>Hello</p>" in text and "List-Unsubscribe" in text


@pytest.mark.parametrize(
    ("status", "headers", "expected", "detail"),
    [
        (429, {"Retry-After": "30"}, RateLimitedError, "rate_limited"),
        (500, {}, TransientProviderError, "provider_5xx"),
        (503, {}, TransientProviderError, "provider_5xx"),
    ],
)
async def test_throttling_and_outages_are_retried(api, status, headers, expected, detail):
    """429 is rate limited with its wait; 5xx transient."""
    fake, provider = api
    fake.script.append((status, {"errors": [{"message": "x"}]}, headers))
    with pytest.raises(expected) as caught:
        await provider.send(MESSAGE, idempotency_key=KEY, timeout=5)
    assert type(caught.value) is expected and caught.value.detail_class == detail
    if expected is RateLimitedError:
        assert caught.value.retry_after == 30


async def test_a_wrong_credential_waits_for_the_operator(api):
    """401 from the provider: transient provider_auth (our configuration, not the message)."""
    fake, provider = api
    wrong = _provider(
        fake.kind, provider.http, provider.url.rsplit("/", 1)[0].removesuffix("/v3/mail"), "wrong"
    )
    with pytest.raises(TransientProviderError) as caught:
        await wrong.send(MESSAGE, idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "provider_auth" and "wrong" not in str(caught.value)


async def test_an_invalid_address_is_permanent(api):
    """The provider refuses the address (Postmark 422/300, SendGrid 400): permanent."""
    _, provider = api
    bad = RenderedMessage(channel="email", recipient="no-at-sign", subject="s", text="t")
    with pytest.raises(PermanentProviderError) as caught:
        await provider.send(bad, idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "provider_rejected"
    assert "no-at-sign" not in str(caught.value)  # the address is never echoed


async def test_postmark_inactive_recipient_is_its_own_class():
    """Postmark's 406 (recipient marked inactive after a bounce or complaint): permanent."""
    fake = FakeNativeApi("postmark", credential="t", inactive={"ann@example.com"})
    http = SharedHttp()
    async with serve(fake.app()) as url:
        provider = _provider("postmark", http, url, "t")
        with pytest.raises(PermanentProviderError) as caught:
            await provider.send(MESSAGE, idempotency_key=KEY, timeout=5)
    await http.aclose()
    assert caught.value.detail_class == "inactive_recipient"


async def test_accepted_then_silent_is_an_unknown_outcome(api):
    """The provider took the message and never answered: unknown_outcome (neither provider
    dedupes a resend, so this blocks failover and is retried only under its own budget)."""
    fake, provider = api
    fake.script.append(ACCEPT_THEN_HANG)
    with pytest.raises(TransientProviderError) as caught:
        await asyncio.wait_for(provider.send(MESSAGE, idempotency_key=KEY, timeout=0.5), 5)
    assert caught.value.detail_class == "unknown_outcome"
    assert len(fake.accepted) == 1
