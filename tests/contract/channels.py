"""The channel providers that must pass ``test_channel_contract.py``.

To put a provider under the contract, append a ``ChannelCase`` to ``CHANNEL_FACTORIES``: a
name and a factory. The factory is an async context manager that receives a ``ChannelEnv``
and yields a ``ChannelUnderTest``: the provider, a message it can deliver, and what the far
side received — one identity per message it got (resends included), using the identity
its consumer deduplicates on (file name, Message-ID, the provider's id, ``webhook-id``).
The real network providers come in through their harnesses in ``real_channels.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from app.adapters.channels.outbox import OutboxProvider
from app.domain.messages import RenderedMessage
from app.domain.ports import ChannelProvider
from tests.contract.real_channels import REAL_CHANNEL_HARNESSES
from tests.support.clock import FakeClock


@dataclass(frozen=True)
class ChannelEnv:
    """What a factory may use: the injected clock and a private temp directory."""

    clock: FakeClock
    tmp_path: Path


@dataclass(frozen=True)
class ChannelUnderTest:
    """A provider, a message it can deliver, and the identities the far side received."""

    provider: ChannelProvider
    message: RenderedMessage
    delivered: Callable[[], Awaitable[list[str]]]


ChannelFactory = Callable[[ChannelEnv], AbstractAsyncContextManager[ChannelUnderTest]]


@dataclass(frozen=True)
class ChannelCase:
    """One entry of the contract's parametrization."""

    name: str
    factory: ChannelFactory


OUTBOX_EMAIL = RenderedMessage(
    "email",
    "ada@example.com",
    subject="Your weekly digest",
    text="Hello Ada",
    html="<p>Hello Ada</p>",
)
OUTBOX_WEBHOOK = RenderedMessage(
    "webhook", "https://hooks.example.com/ada", body={"type": "reminder.weekly_digest"}
)


def outbox_factory(message: RenderedMessage) -> ChannelFactory:
    """The outbox provider for one channel; identity: the visible file names it wrote."""

    @asynccontextmanager
    async def factory(env: ChannelEnv) -> AsyncIterator[ChannelUnderTest]:
        directory = env.tmp_path / "outbox"

        async def delivered() -> list[str]:
            folder = directory / message.channel
            if not folder.exists():
                return []
            return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))

        yield ChannelUnderTest(OutboxProvider(directory, fsync=True), message, delivered)

    return factory


def real_factory(name: str) -> ChannelFactory:
    """A real provider in front of its local server (harness from ``real_channels``)."""

    @asynccontextmanager
    async def factory(env: ChannelEnv) -> AsyncIterator[ChannelUnderTest]:
        async with REAL_CHANNEL_HARNESSES[name]() as harness:

            async def delivered() -> list[str]:
                return list(harness.delivered_ids())

            yield ChannelUnderTest(harness.provider, harness.message, delivered)

    return factory


CHANNEL_FACTORIES: list[ChannelCase] = [
    ChannelCase("outbox-email", outbox_factory(OUTBOX_EMAIL)),
    ChannelCase("outbox-webhook", outbox_factory(OUTBOX_WEBHOOK)),
    *(ChannelCase(name, real_factory(name)) for name in sorted(REAL_CHANNEL_HARNESSES)),
]
