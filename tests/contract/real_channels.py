"""Harnesses that put each real channel provider in front of its real local server.

``REAL_CHANNEL_HARNESSES`` maps a provider name to an async context manager yielding a
``ChannelHarness``; the shared contract suite parametrizes over it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from pydantic import SecretStr

from app.adapters.channels.email_api import EmailApiProvider
from app.adapters.channels.http import SharedHttp
from app.adapters.channels.smtp import SmtpProvider
from app.adapters.channels.ssrf import TargetPolicy
from app.adapters.channels.webhook import WebhookProvider
from app.domain.messages import RenderedMessage
from app.domain.ports import ChannelProvider
from tests.support.channel_servers import (
    HANG,
    FakeEmailApi,
    WebhookSink,
    free_port,
    serve,
    smtp_server,
)

EMAIL = RenderedMessage(
    "email",
    "ada@example.com",
    subject="Contract",
    text="Hello",
    html="<p>Hello</p>",
    headers={"List-Unsubscribe": "<https://relay.example/unsubscribe/t>"},
)
WEBHOOK_SECRET = SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
LOOPBACK = TargetPolicy.from_entries(["127.0.0.0/8"])


@dataclass
class ChannelHarness:
    """A provider, a message it can send, and what its server observed."""

    provider: ChannelProvider
    message: RenderedMessage
    # The identity receivers deduplicate on, one per message the server accepted.
    delivered_ids: Callable[[], list[str]]
    hang: Callable[[], None]  # make the server stop answering
    unreachable: ChannelProvider  # the same provider pointed at a port nobody listens on


@asynccontextmanager
async def smtp_harness() -> AsyncIterator[ChannelHarness]:
    """SMTP against aiosmtpd (identity: Message-ID)."""
    with smtp_server() as server:

        def hang() -> None:
            server.handler.mode = HANG

        yield ChannelHarness(
            SmtpProvider(
                host=server.host, port=server.port, sender="r@relay.example", security="none"
            ),
            EMAIL,
            lambda: [str(m["Message-ID"]) for m in server.handler.messages],
            hang,
            SmtpProvider(
                host="127.0.0.1", port=free_port(), sender="r@relay.example", security="none"
            ),
        )


@asynccontextmanager
async def email_api_harness() -> AsyncIterator[ChannelHarness]:
    """The email API against the Resend-shaped fake (identity: the provider's id)."""
    fake = FakeEmailApi(api_key="re_contract")
    http = SharedHttp()
    try:
        async with serve(fake.app()) as base_url:

            def make(url: str) -> EmailApiProvider:
                return EmailApiProvider(
                    http, base_url=url, api_key=SecretStr("re_contract"), sender="r@relay.example"
                )

            def delivered() -> list[str]:
                ids = {key: answer["id"] for key, (_, answer) in fake._keys.items()}
                return [ids[r["headers"]["Idempotency-Key"]] for r in fake.requests]

            yield ChannelHarness(
                make(base_url),
                EMAIL,
                delivered,
                lambda: fake.script.extend([HANG] * 10),
                make(f"http://127.0.0.1:{free_port()}"),
            )
            fake.release.set()
    finally:
        await http.aclose()


@asynccontextmanager
async def webhook_harness() -> AsyncIterator[ChannelHarness]:
    """Webhooks against a local receiver, loopback allowlisted (identity: webhook-id)."""
    sink = WebhookSink()
    http = SharedHttp()
    provider = WebhookProvider(http, signing_secret=WEBHOOK_SECRET, policy=LOOPBACK)
    try:
        async with serve(sink.app()) as base_url:
            yield ChannelHarness(
                provider,
                RenderedMessage("webhook", f"{base_url}/hook", body={"type": "reminder.test"}),
                lambda: [r["headers"]["webhook-id"] for r in sink.received],
                lambda: sink.script.extend([HANG] * 10),
                _UnreachableWebhook(provider, f"http://127.0.0.1:{free_port()}/hook"),
            )
            sink.release.set()
    finally:
        await http.aclose()


@dataclass
class _UnreachableWebhook:
    """The webhook provider with every message re-addressed to a dead port."""

    inner: WebhookProvider
    url: str
    name: str = "webhook"

    async def send(self, message: RenderedMessage, *, idempotency_key: str, timeout: float):
        """Send to the dead URL."""
        moved = RenderedMessage(message.channel, self.url, body=message.body)
        return await self.inner.send(moved, idempotency_key=idempotency_key, timeout=timeout)


REAL_CHANNEL_HARNESSES: dict[str, Callable[[], AbstractAsyncContextManager[ChannelHarness]]] = {
    "smtp": smtp_harness,
    "email_api": email_api_harness,
    "webhook": webhook_harness,
}
