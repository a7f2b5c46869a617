"""The embedded queue (``REMINDERS_QUEUE=embedded``): a table of messages (``publisher``)
pushed by a dispatcher (``dispatcher``) over HTTP through a signing client (``pusher``), or
in process. It pushes as Infrai does, so Infrai's push format reads it."""

from ..kind import QueueKind, lazy
from .settings import EmbeddedQueueSettings

KIND = QueueKind(
    name="embedded",
    max_delay="7 days",
    publisher=lazy(__name__, "publisher", "build_embedded_publisher"),
    push_format=lazy("app.adapters.queues", "infrai.build", "build_infrai_push_format"),
    settings=(EmbeddedQueueSettings,),
    settings_checks=(
        lazy(__name__, "settings_checks", "check_embedded_retries"),
        lazy(__name__, "settings_checks", "check_embedded_push_timeout"),
        lazy(__name__, "settings_checks", "check_embedded_visibility"),
    ),
)
