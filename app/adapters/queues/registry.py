"""Which publisher a ``REMINDERS_QUEUE`` name builds."""

from __future__ import annotations

from app.domain.errors import ConfigError
from app.domain.ports import QueuePublisher
from app.settings import Settings

from .memory import MemoryPublisher


def build_publisher(settings: Settings) -> QueuePublisher:
    """The publisher the settings name."""
    if settings.queue == "memory":
        return MemoryPublisher()
    raise ConfigError(f"REMINDERS_QUEUE={settings.queue!r} is not available in this build")
