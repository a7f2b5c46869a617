"""The RabbitMQ queue kind built from the settings: publisher, pull consumer, setup.

The aio-pika modules are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kind import Report, ToolOptions, setup_report

if TYPE_CHECKING:
    from app.adapters.channels.http import SharedHttp
    from app.domain.ports import PullConsumer, QueuePublisher
    from app.settings import Settings

    from ..parts import QueueParts


def build_rabbitmq_publisher(parts: QueueParts) -> QueuePublisher:
    """The publisher the settings describe."""
    from .publisher import RabbitPublisher

    rabbit = parts.settings.rabbitmq
    return RabbitPublisher(
        rabbit.url.get_secret_value(),
        max_delay_seconds=rabbit.max_delay_seconds,
        connect_timeout=rabbit.connect_timeout_seconds,
    )


def build_rabbitmq_consumer(settings: Settings, http: SharedHttp | None = None) -> PullConsumer:
    """The worker's consumer: prefetch = the worker's in-flight bound."""
    from .consumer import RabbitConsumer

    rabbit = settings.rabbitmq
    return RabbitConsumer(
        rabbit.url.get_secret_value(),
        prefetch=settings.worker.max_in_flight,
        max_delay_seconds=rabbit.max_delay_seconds,
        connect_timeout=rabbit.connect_timeout_seconds,
    )


async def setup_topology(
    settings: Settings, http: SharedHttp | None = None, options: ToolOptions | None = None
) -> Report:
    """Declare the topology of every RabbitMQ queue (``reminders setup --queue rabbitmq``)."""
    from .setup import declare_topology

    queues = settings.queues_of_kind("rabbitmq")
    rabbit = settings.rabbitmq
    declared = await declare_topology(
        rabbit.url.get_secret_value(),
        queues,
        delivery_limit=rabbit.delivery_limit,
        max_delay_seconds=rabbit.max_delay_seconds,
        timeout=rabbit.connect_timeout_seconds,
    )
    return setup_report("rabbitmq", declared)
