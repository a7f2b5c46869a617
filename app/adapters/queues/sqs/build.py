"""The Amazon SQS queue kind built from the settings: publisher, pull consumer, setup.

aiobotocore is imported on the first call, so nothing here needs the extra to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kind import Report, ToolOptions, setup_report
from .client import SqsClient
from .publisher import is_fifo

if TYPE_CHECKING:
    from app.adapters.channels.http import SharedHttp
    from app.domain.ports import PullConsumer, QueuePublisher
    from app.settings import Settings

    from ..parts import QueueParts


def sqs_client(settings: Settings) -> SqsClient:
    """A client for the configured region, endpoint and queue URLs."""
    sqs = settings.sqs
    return SqsClient(
        region=sqs.region or None, endpoint_url=sqs.endpoint_url or None, queue_urls=sqs.queue_urls
    )


def build_sqs_publisher(parts: QueueParts) -> QueuePublisher:
    """The publisher; max delay 0 when any SQS queue is FIFO (no per-message delay there)."""
    from .publisher import SqsPublisher

    settings = parts.settings
    queues = settings.queues_of_kind("sqs")
    return SqsPublisher(sqs_client(settings), fifo=any(is_fifo(q) for q in queues))


def build_sqs_consumer(settings: Settings, http: SharedHttp | None = None) -> PullConsumer:
    """The worker's consumer."""
    from .consumer import SqsConsumer

    return SqsConsumer(sqs_client(settings))


async def setup_queues(
    settings: Settings, http: SharedHttp | None = None, options: ToolOptions | None = None
) -> Report:
    """Each SQS queue and its DLQ with a redrive policy (``reminders setup --queue sqs``)."""
    from .setup import create_queues

    queues = settings.queues_of_kind("sqs")
    client = sqs_client(settings)
    try:
        created = await create_queues(
            client, queues, max_receive_count=settings.sqs.max_receive_count
        )
        return setup_report("sqs", created)
    finally:
        await client.aclose()
