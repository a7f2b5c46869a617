"""The Infrai queue kind built from the settings: publisher, push format, pull consumer.

The embedded and memory queues push exactly as Infrai does, so they use its push format.
"""

from __future__ import annotations

from app.adapters.channels.http import SharedHttp
from app.domain.ports import PullConsumer, PushFormat, QueuePublisher
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


def build_consumer(settings: Settings, http: SharedHttp | None) -> PullConsumer:
    """The worker's consumer over an API client of its own."""
    api = InfraiApi(build_http_client(settings.infrai), infrai_config(settings.infrai))
    return build_infrai_consumer(api, settings.infrai, owns_api=True)
