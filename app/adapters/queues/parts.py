"""What a queue kind's builders may use: the settings and the container's shared parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class QueueParts:
    """Passed to every builder of a ``QueueKind`` (``kinds.QUEUE_KINDS``)."""

    settings: Settings
    engine: AsyncEngine | None = None
    clock: Callable[[], datetime] | None = None
    http: SharedHttp | None = None

    def shared_http(self) -> SharedHttp:
        """The container's HTTP pool; a kind that talks HTTP cannot be built without it."""
        if self.http is None:
            raise ConfigError("this queue needs the service's shared HTTP client")
        return self.http

    def push_secrets(self) -> list[bytes]:
        """``REMINDERS_PUSH_SECRETS`` as bytes, current first."""
        return [secret.get_secret_value().encode() for secret in self.settings.push_secrets]
