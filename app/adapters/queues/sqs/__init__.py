"""Amazon SQS (``REMINDERS_QUEUE=sqs``, the ``[aws]`` extra): a publisher with delays up to
15 minutes, a pull consumer for ``reminders worker`` and ``reminders setup --queue sqs``.

aiobotocore is imported on the first call (``build``), so nothing here needs the extra.
"""

from ..kind import QueueKind, lazy
from .settings import SqsSettings

KIND = QueueKind(
    name="sqs",
    max_delay="15 minutes (0 when a queue is FIFO)",
    publisher=lazy(__name__, "build", "build_sqs_publisher"),
    consumer=lazy(__name__, "build", "build_sqs_consumer"),
    setup=lazy(__name__, "build", "setup_queues"),
    settings=(SqsSettings,),
    settings_checks=(lazy(__name__, "settings_checks", "check_sqs_settings"),),
    extra="aws",
    extra_modules=("aiobotocore",),
)
