"""RabbitMQ (``REMINDERS_QUEUE=rabbitmq``, the ``[rabbitmq]`` extra): quorum queues, TTL
delay buckets, publisher confirms, and a pull consumer for ``reminders worker``.

Nothing here is imported unless a RabbitMQ queue is configured (``build`` functions below
import the aio-pika modules on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.domain.ports import PullConsumer, QueuePublisher
    from app.settings import Settings


def build_rabbitmq_publisher(settings: Settings) -> QueuePublisher:
    """The publisher the settings describe."""
    from .publisher import RabbitPublisher

    rabbit = settings.rabbitmq
    return RabbitPublisher(
        rabbit.url.get_secret_value(),
        max_delay_seconds=rabbit.max_delay_seconds,
        connect_timeout=rabbit.connect_timeout_seconds,
    )


def build_rabbitmq_consumer(settings: Settings) -> PullConsumer:
    """The worker's consumer: prefetch = the worker's in-flight bound."""
    from .consumer import RabbitConsumer

    rabbit = settings.rabbitmq
    return RabbitConsumer(
        rabbit.url.get_secret_value(),
        prefetch=settings.worker.max_in_flight,
        max_delay_seconds=rabbit.max_delay_seconds,
        connect_timeout=rabbit.connect_timeout_seconds,
    )
