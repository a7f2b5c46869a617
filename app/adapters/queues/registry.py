"""The publishers and push formats of the configured queues, built from the kinds
(``kinds.QUEUE_KINDS``: one package per kind, see ``kind.QueueKind``).

Channels may use different kinds at once (``REMINDERS_<CHANNEL>_QUEUE_KIND``): each queue
name gets its kind's publisher and push format, and ``/push/{queue}`` knows only the
configured names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.domain.ports import PushFormat, QueuePublisher
from app.settings import Settings

from .kind import QueueKind
from .kinds import KINDS_BY_NAME
from .parts import QueueParts
from .routing import RoutingPublisher


def _kind(name: str) -> QueueKind:
    kind = KINDS_BY_NAME.get(name)
    if kind is None:
        raise ConfigError(f"queue kind {name!r} is not available in this build")
    return kind


def build_publisher(
    settings: Settings,
    *,
    engine: AsyncEngine | None = None,
    clock: Callable[[], datetime] | None = None,
    http: SharedHttp | None = None,
) -> QueuePublisher:
    """The publisher the settings name; a routing one when channels use different kinds."""
    parts = QueueParts(settings, engine, clock, http)
    by_kind = {kind: _kind(kind).publisher(parts) for kind in settings.queue_kinds_in_use}
    if len(by_kind) == 1:
        return next(iter(by_kind.values()))
    return RoutingPublisher({queue: by_kind[kind] for queue, kind in settings.queue_kinds.items()})


def build_push_formats(settings: Settings, *, http: SharedHttp) -> dict[str, PushFormat]:
    """The push format of every configured queue name."""
    parts = QueueParts(settings, http=http)
    shared: dict[str, PushFormat] = {}
    formats: dict[str, PushFormat] = {}
    for queue, name in settings.queue_kinds.items():
        kind = _kind(name)
        if kind.push_format_for is not None:
            formats[queue] = kind.push_format_for(parts, queue)
        elif kind.push_format is not None:  # None: a pull queue, /push/{queue} is a 404
            if name not in shared:
                shared[name] = kind.push_format(parts)
            formats[queue] = shared[name]
    return formats


async def close_publisher(publisher: QueuePublisher) -> None:
    """Release what a publisher holds (HTTP, gRPC and AWS clients); a no-op for the others."""
    close = getattr(publisher, "aclose", None)
    if close is not None:
        await close()
