"""The Infrai queue kind built from the settings: publisher, push format, pull consumer.

The embedded and memory queues push exactly as Infrai does, so they use its push format.
"""

from __future__ import annotations

from typing import Any

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.domain.ports import PullConsumer, PushFormat, QueuePublisher
from app.domain.retry import BackoffPolicy
from app.settings import Settings

from ..parts import QueueParts
from .api import InfraiApi
from .consumer import build_infrai_consumer
from .publisher import build_http_client, build_infrai_publisher, infrai_config
from .push_format import InfraiPushFormat


def build_publisher(parts: QueueParts) -> QueuePublisher:
    """Infrai's REST publisher."""
    return build_infrai_publisher(parts.settings.infrai)


def build_infrai_push_format(parts: QueueParts) -> PushFormat:
    """The ``sha256=`` HMAC check of the push secrets (current and next)."""
    settings = parts.settings
    return InfraiPushFormat(
        parts.push_secrets(),
        signature_header=settings.push_signature_header,
        timestamp_header=settings.push_timestamp_header,
        tolerance_seconds=settings.push_timestamp_tolerance_seconds,
        require_timestamp=settings.push_require_timestamp,
    )


def worker_knobs(settings: Settings) -> dict[str, Any]:
    """``reminders worker`` on Infrai: its own batch size, visibility timeout and idle
    backoff (Infrai answers an empty consume at once: the worker waits between polls)."""
    infrai = settings.infrai
    if not infrai.api_key.get_secret_value():
        raise ConfigError("REMINDERS_INFRAI_API_KEY is not set")
    return {
        "max_messages": infrai.worker_max_messages,
        "visibility_timeout": infrai.visibility_timeout(settings.lease_seconds),
        "idle_backoff": BackoffPolicy(
            infrai.worker_idle_min_seconds,
            infrai.worker_idle_max_seconds,
            infrai.worker_idle_min_seconds,
        ),
    }


def build_consumer(settings: Settings, http: SharedHttp | None) -> PullConsumer:
    """The worker's consumer over an API client of its own."""
    api = InfraiApi(build_http_client(settings.infrai), infrai_config(settings.infrai))
    return build_infrai_consumer(api, settings.infrai, owns_api=True)
