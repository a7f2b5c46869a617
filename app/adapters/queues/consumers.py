"""The pull consumer of each pull queue kind (``reminders worker``).

A kind is pulled when its ``QueueKind`` has a ``consumer``; that builder's module is
imported only when a worker consumes the kind, so the broker and cloud libraries stay
optional.
"""

from __future__ import annotations

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.domain.ports import PullConsumer
from app.settings import Settings

from .kinds import KINDS_BY_NAME, QUEUE_KINDS


def build_consumer(kind: str, settings: Settings, http: SharedHttp | None = None) -> PullConsumer:
    """The consumer of one pull queue kind; ``ConfigError`` for a push-only kind."""
    found = KINDS_BY_NAME.get(kind)
    if found is None or found.consumer is None:
        pull = ", ".join(sorted(k.name for k in QUEUE_KINDS if k.consumer is not None))
        raise ConfigError(f"the {kind} queue pushes to us; `reminders worker` pulls only {pull}")
    consumer: PullConsumer = found.consumer(settings, http)
    return consumer
