"""The embedded queue: a table of messages (``publisher``) pushed by a dispatcher
(``dispatcher``) over HTTP through a signing client (``pusher``), or in process."""

from .dispatcher import (
    Dispatcher,
    DispatchLimits,
    DispatchReport,
    LocalAnswer,
    LocalDelivery,
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
    "LocalAnswer",
    "LocalDelivery",
    "PushFailed",
    "PushResponse",
    "PushResult",
    "PushTarget",
    "Pusher",
    "dispatcher_from_settings",
]
