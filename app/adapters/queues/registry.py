"""Which publisher a ``REMINDERS_QUEUE`` name builds."""

from __future__ import annotations

from app.domain.errors import ConfigError
from app.domain.ports import QueuePublisher
from app.settings import Settings

from .infrai import build_infrai_publisher
from .memory import MemoryPublisher


def build_publisher(settings: Settings) -> QueuePublisher:
    """The publisher the settings name."""
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
