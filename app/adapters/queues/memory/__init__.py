"""The in-process queue (``REMINDERS_QUEUE=memory``): tests and the contract suite's
reference. Pushes nothing by itself; its messages are signed as Infrai signs them."""

from ..kind import QueueKind, lazy

KIND = QueueKind(
    name="memory",
    max_delay="7 days (the managed queue's limits)",
    publisher=lazy(__name__, "publisher", "build_memory_publisher"),
    push_format=lazy("app.adapters.queues", "infrai.build", "build_infrai_push_format"),
)
