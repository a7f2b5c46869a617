"""Which publisher a ``REMINDERS_QUEUE`` name builds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.domain.errors import ConfigError
from app.domain.ports import QueuePublisher
from app.settings import Settings

from .embedded import EmbeddedQueuePublisher
from .infrai import build_infrai_publisher
from .memory import MemoryPublisher


def build_publisher(
    settings: Settings,
    *,
    engine: AsyncEngine | None = None,
    clock: Callable[[], datetime] | None = None,
) -> QueuePublisher:
    """The publisher the settings name (the embedded queue stores into ``engine``)."""
    if settings.queue == "embedded":
        if engine is None:
            raise ConfigError("the embedded queue needs the service's database engine")
        if clock is None:
            return EmbeddedQueuePublisher(engine, max_retries=settings.embedded.max_retries)
        return EmbeddedQueuePublisher(
            engine, max_retries=settings.embedded.max_retries, clock=clock
        )
    if settings.queue == "memory":
        return MemoryPublisher()
    if settings.queue == "infrai":
        return build_infrai_publisher(settings.infrai)
    raise ConfigError(f"REMINDERS_QUEUE={settings.queue!r} is not available in this build")


async def close_publisher(publisher: QueuePublisher) -> None:
    """Release what a publisher holds (Infrai's HTTP client); a no-op for the others."""
    close = getattr(publisher, "aclose", None)
    if close is not None:
        await close()
