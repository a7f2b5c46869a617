"""The Protocols adapters implement: queue publishers and channel providers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from .messages import Delivery, OutgoingMessage, RenderedMessage, SendResult

# Infrai's (and most managed queues') message size ceiling.
MAX_MESSAGE_BYTES = 256 * 1024


class QueuePublisher(Protocol):
    """Publishes small delayed messages; ``max_delay_seconds`` bounds the sweep horizon."""

    name: str
    max_delay_seconds: float

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; return the queue's message id (same key → same id)."""
        ...

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Publish several messages; ids in the same order."""
        ...


class ChannelProvider(Protocol):
    """Sends a rendered message through one provider for one channel.

    Implementations must finish (or raise) within ``timeout`` seconds, pass
    ``idempotency_key`` to the provider where it supports one, and raise only
    ``TransientProviderError``, ``RateLimitedError`` or ``PermanentProviderError``.
    """

    name: str

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """Deliver the message; return the provider's request id."""
        ...


class PushFormat(Protocol):
    """Authenticates and parses one queue vendor's push requests."""

    name: str

    def authenticate(self, body: bytes, headers: Mapping[str, str], *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the raw body is signed by a configured secret."""
        ...

    def parse(self, queue: str, body: bytes) -> Delivery:
        """The delivery in an authenticated body; ``MalformedDelivery`` when unusable."""
        ...


class QueueConsumer(Protocol):
    """Pulls messages from a queue for the pull worker (private networks)."""

    name: str

    async def consume(
        self, queue: str, *, max_messages: int, visibility_timeout: int
    ) -> list[Delivery]:
        """Lease up to ``max_messages``; each stays invisible for ``visibility_timeout`` s."""
        ...

    async def ack(self, queue: str, message_id: str) -> None:
        """Delete a message that was handled (an ack outcome)."""
        ...

    async def nack(self, queue: str, message_id: str, *, delay: float) -> bool:
        """Redeliver after ``delay`` s; False when no nack route exists (visibility expiry)."""
        ...
