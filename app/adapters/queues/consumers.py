"""The pull consumer of each pull queue kind (``reminders worker``).

A kind's consumer module is imported only when a worker consumes that kind, so the
broker and cloud libraries stay optional.
"""

from __future__ import annotations

from collections.abc import Callable

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.domain.ports import PullConsumer
from app.settings import Settings


def _infrai(settings: Settings, http: SharedHttp | None) -> PullConsumer:
    from .infrai import InfraiApi, build_http_client, build_infrai_consumer, infrai_config

    api = InfraiApi(build_http_client(settings.infrai), infrai_config(settings.infrai))
    return build_infrai_consumer(api, settings.infrai, owns_api=True)


def _rabbitmq(settings: Settings, http: SharedHttp | None) -> PullConsumer:
    from .rabbitmq import build_rabbitmq_consumer

    return build_rabbitmq_consumer(settings)


def _sqs(settings: Settings, http: SharedHttp | None) -> PullConsumer:
    from .sqs import build_sqs_consumer

    return build_sqs_consumer(settings)


PULL_KINDS: dict[str, Callable[[Settings, SharedHttp | None], PullConsumer]] = {
    "infrai": _infrai,
    "rabbitmq": _rabbitmq,
    "sqs": _sqs,
}


def build_consumer(kind: str, settings: Settings, http: SharedHttp | None = None) -> PullConsumer:
    """The consumer of one pull queue kind; ``ConfigError`` for a push-only kind."""
    builder = PULL_KINDS.get(kind)
    if builder is None:
        pull = ", ".join(sorted(PULL_KINDS))
        raise ConfigError(f"the {kind} queue pushes to us; `reminders worker` pulls only {pull}")
    return builder(settings, http)
