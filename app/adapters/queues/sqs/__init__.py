"""Amazon SQS (``REMINDERS_QUEUE=sqs``, the ``[aws]`` extra): a publisher with delays up to
15 minutes, a pull consumer for ``reminders worker`` and ``reminders setup --queue sqs``.

aiobotocore is imported on the first call, so nothing here needs the extra to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .client import SqsClient
from .publisher import is_fifo

if TYPE_CHECKING:
    from app.domain.ports import PullConsumer, QueuePublisher
    from app.settings import Settings


def sqs_client(settings: Settings) -> SqsClient:
    """A client for the configured region, endpoint and queue URLs."""
    sqs = settings.sqs
    return SqsClient(
        region=sqs.region or None, endpoint_url=sqs.endpoint_url or None, queue_urls=sqs.queue_urls
    )


def build_sqs_publisher(settings: Settings) -> QueuePublisher:
    """The publisher; max delay 0 when any SQS queue is FIFO (no per-message delay there)."""
    from .publisher import SqsPublisher

    queues = [q for q, kind in settings.queue_kinds.items() if kind == "sqs"]
    return SqsPublisher(sqs_client(settings), fifo=any(is_fifo(q) for q in queues))


def build_sqs_consumer(settings: Settings) -> PullConsumer:
    """The worker's consumer."""
    from .consumer import SqsConsumer

    return SqsConsumer(sqs_client(settings))
