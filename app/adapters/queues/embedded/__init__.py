"""The embedded queue: a table of messages (``publisher``) pushed over HTTP by a
dispatcher (``dispatcher``) through a signing HTTP client (``pusher``)."""

from .dispatcher import (
    Dispatcher,
    DispatchLimits,
    DispatchReport,
    PushResult,
    dispatcher_from_settings,
)
from .publisher import EmbeddedQueuePublisher
from .pusher import AiohttpPusher, Pusher, PushFailed, PushResponse, PushTarget

__all__ = [
    "AiohttpPusher",
    "DispatchLimits",
    "DispatchReport",
    "Dispatcher",
    "EmbeddedQueuePublisher",
    "PushFailed",
    "PushResponse",
    "PushResult",
    "PushTarget",
    "Pusher",
    "dispatcher_from_settings",
]
