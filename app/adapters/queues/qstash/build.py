"""The Upstash QStash queue kind built from the settings."""

from __future__ import annotations

from app.domain.clock import utc_now
from app.domain.ports import PushFormat, QueuePublisher

from ..parts import QueueParts
from .publisher import QStashPublisher
from .push_format import QStashPushFormat


def build_qstash_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to QStash, addressed to our own push route of each queue."""
    settings = parts.settings
    qstash = settings.qstash
    return QStashPublisher(
        parts.shared_http(),
        base_url=qstash.url,
        token=qstash.token,
        push_url_for=settings.push_url,
        retries=qstash.retries,
        max_delay_seconds=qstash.max_delay_seconds,
        clock=parts.clock or utc_now,
    )


def build_qstash_push_format_for(parts: QueueParts, queue: str) -> PushFormat:
    """The JWT check of one queue: ``sub`` must be that queue's configured push URL."""
    qstash = parts.settings.qstash
    return QStashPushFormat(
        qstash.signing_keys(),
        push_url=parts.settings.push_url(queue),
        leeway_seconds=qstash.clock_leeway_seconds,
    )
