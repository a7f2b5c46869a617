"""The embedded queue's dispatcher as ``REMINDERS_EMBEDDED_*`` and the push settings
configure it: what ``serve``, ``reminders dispatch`` and the demo start."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.queue_claim import RoundStatements
from app.domain.retry import RandomSource
from app.settings import Settings

from .dispatcher import Dispatcher, DispatchLimits
from .local import LocalDelivery
from .pusher import AiohttpPusher, Pusher, PushTarget


def dispatcher_from_settings(
    settings: Settings,
    engine: AsyncEngine,
    *,
    clock: Callable[[], datetime],
    rand: RandomSource,
    pusher: Pusher | None = None,
    local: LocalDelivery | None = None,
    statements: RoundStatements | None = None,
) -> tuple[Dispatcher, AiohttpPusher | None]:
    """A dispatcher configured by ``REMINDERS_EMBEDDED_*``; the pusher it owns, to close.
    With ``local`` it delivers in process and opens no HTTP pool."""
    embedded = settings.embedded
    owned = None
    if pusher is None and local is None:
        owned = AiohttpPusher(max_connections=embedded.concurrency)
    target = PushTarget(
        base_url=embedded.push_base_url or settings.public_base_url,
        secret=settings.push_secrets[0].get_secret_value().encode(),
        signature_header=settings.push_signature_header,
        timestamp_header=settings.push_timestamp_header or None,
    )
    limits = DispatchLimits(
        concurrency=embedded.concurrency,
        batch_size=embedded.batch_size,
        visibility_timeout_seconds=settings.embedded_visibility_timeout,
        push_timeout_seconds=settings.embedded_push_timeout,
        backoff=embedded.backoff,
    )
    chosen = pusher or owned
    dispatcher = Dispatcher(
        engine, chosen, target, limits=limits, clock=clock, rand=rand, local=local,
        statements=statements,
    )  # fmt: skip
    return dispatcher, owned
