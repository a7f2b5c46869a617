"""RabbitMQ (``REMINDERS_QUEUE=rabbitmq``, the ``[rabbitmq]`` extra): quorum queues, TTL
delay buckets, publisher confirms, and a pull consumer for ``reminders worker``.

Nothing here imports aio-pika until a RabbitMQ queue is built (``build``).
"""

from ..kind import QueueKind, lazy
from .settings import RabbitMQSettings

KIND = QueueKind(
    name="rabbitmq",
    max_delay="REMINDERS_RABBITMQ_MAX_DELAY_SECONDS (1 hour; TTL delay buckets)",
    publisher=lazy(__name__, "build", "build_rabbitmq_publisher"),
    consumer=lazy(__name__, "build", "build_rabbitmq_consumer"),
    setup=lazy(__name__, "build", "setup_topology"),
    settings=(RabbitMQSettings,),
    extra="rabbitmq",
    extra_modules=("aio_pika",),
)
