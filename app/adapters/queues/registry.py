"""The queue kinds: which publisher and which push format each ``REMINDERS_QUEUE`` value builds.

One registry for every kind. A new queue is its adapter modules plus one ``QueueKind``
entry in ``QUEUE_KINDS`` (and its name in the settings' ``QueueKind`` literal). Channels may
use different kinds at once (``REMINDERS_<CHANNEL>_QUEUE_KIND``): each queue name gets its
kind's publisher and push format, and ``/push/{queue}`` knows only the configured names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.channels.http import SharedHttp
from app.adapters.push_formats.infrai import InfraiPushFormat
from app.domain.errors import ConfigError
from app.domain.ports import PushFormat, QueuePublisher
from app.settings import Settings

from .aws import (
    build_qstash_publisher,
    build_qstash_push_format_for,
    build_sns_publisher,
    build_sns_push_format,
)
from .embedded import EmbeddedQueuePublisher
from .infrai import build_infrai_publisher
from .memory import MemoryPublisher
from .parts import QueueParts
from .routing import RoutingPublisher


@dataclass(frozen=True, slots=True)
class QueueKind:
    """How to build one kind's publisher and push format.

    ``push_format`` is built once per kind and shared by its queues (caches of fetched
    keys stay warm), unless ``push_format_for`` builds one per queue name (QStash: the
    signature names the queue's URL).
    """

    publisher: Callable[[QueueParts], QueuePublisher]
    push_format: Callable[[QueueParts], PushFormat] | None = None
    push_format_for: Callable[[QueueParts, str], PushFormat] | None = None


def _memory(parts: QueueParts) -> QueuePublisher:
    return MemoryPublisher()


def _embedded(parts: QueueParts) -> QueuePublisher:
    if parts.engine is None:
        raise ConfigError("the embedded queue needs the service's database engine")
    max_retries = parts.settings.embedded.max_retries
    if parts.clock is None:
        return EmbeddedQueuePublisher(parts.engine, max_retries=max_retries)
    return EmbeddedQueuePublisher(parts.engine, max_retries=max_retries, clock=parts.clock)


def _infrai(parts: QueueParts) -> QueuePublisher:
    return build_infrai_publisher(parts.settings.infrai)


def _infrai_push_format(parts: QueueParts) -> PushFormat:
    # The embedded queue and the memory queue push exactly as Infrai does.
    settings = parts.settings
    return InfraiPushFormat(
        parts.push_secrets(),
        signature_header=settings.push_signature_header,
        timestamp_header=settings.push_timestamp_header,
        tolerance_seconds=settings.push_timestamp_tolerance_seconds,
        require_timestamp=settings.push_require_timestamp,
    )


def _lazy(module: str, builder: str) -> Callable[..., Any]:
    """A builder imported on first use: a kind's client libraries come from an extra, and
    the default install must start without them (the settings name the missing extra)."""

    def build(*args: Any) -> Any:
        return getattr(import_module(module, __package__), builder)(*args)

    return build


QUEUE_KINDS: dict[str, QueueKind] = {
    "memory": QueueKind(_memory, _infrai_push_format),
    "embedded": QueueKind(_embedded, _infrai_push_format),
    "infrai": QueueKind(_infrai, _infrai_push_format),
    "cloudtasks": QueueKind(
        _lazy(".google", "build_cloudtasks_publisher"),
        _lazy(".google", "build_cloudtasks_push_format"),
    ),
    "pubsub": QueueKind(
        _lazy(".google", "build_pubsub_publisher"), _lazy(".google", "build_pubsub_push_format")
    ),
    "sns": QueueKind(build_sns_publisher, build_sns_push_format),
    "qstash": QueueKind(build_qstash_publisher, push_format_for=build_qstash_push_format_for),
    # Pulled by `reminders worker` (app/adapters/queues/consumers.py): no push route.
    "rabbitmq": QueueKind(
        lambda parts: _lazy(".rabbitmq", "build_rabbitmq_publisher")(parts.settings)
    ),
    "sqs": QueueKind(lambda parts: _lazy(".sqs", "build_sqs_publisher")(parts.settings)),
}


def _kind(name: str) -> QueueKind:
    kind = QUEUE_KINDS.get(name)
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
