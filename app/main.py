"""Application factory: ``create_app(settings)``; the lifespan builds every shared object once."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

from fastapi import FastAPI

from app.adapters.channels.http import SharedHttp
from app.adapters.channels.registry import build_providers
from app.adapters.push_formats.infrai import InfraiPushFormat
from app.adapters.queues.registry import build_publisher, close_publisher
from app.adapters.rendering import Renderer
from app.db.engine import autocommit, create_engine
from app.domain.ports import QueuePublisher
from app.domain.retry import RandomSource
from app.domain.unsubscribe import UnsubscribeLinks
from app.observability import configure_logging, instrument_providers
from app.services.background import BackgroundWork, runs_in_serve, start_background
from app.services.receive import DeliveryPolicy, Receiver
from app.services.sweep import SweepLimits
from app.settings import Settings

from .api import cron, health, push, reminders, schedules, unsubscribe
from .api.deps import Container
from .api.errors import install_error_handlers
from .api.operations import install_operations


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def build_container(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utc_now,
    rand: RandomSource | None = None,
    publisher: QueuePublisher | None = None,
) -> Container:
    """Every long-lived object of the service, wired from settings (tests inject parts)."""
    engine = create_engine(settings.database_url, pool_size=settings.database_pool_size)
    http = SharedHttp(max_connections=settings.http_max_connections)
    renderer = Renderer(settings.templates_dir, unsubscribe_links=_unsubscribe_links(settings))
    policy = DeliveryPolicy(
        lease=timedelta(seconds=settings.lease_seconds),
        provider_timeout_seconds=settings.provider_timeout_seconds,
        max_attempts=settings.max_attempts,
        backoff=settings.backoff,
        usefulness_grace=timedelta(seconds=settings.usefulness_grace_seconds),
    )
    receiver = Receiver(
        engine=engine,
        autocommit=autocommit(engine),
        providers=instrument_providers(build_providers(settings, http=http)),
        renderer=renderer,
        policy=policy,
        clock=clock,
        rand=rand or random.SystemRandom(),
    )
    push_format = InfraiPushFormat(
        [secret.get_secret_value().encode() for secret in settings.push_secrets],
        signature_header=settings.push_signature_header,
        timestamp_header=settings.push_timestamp_header,
        tolerance_seconds=settings.push_timestamp_tolerance_seconds,
    )
    return Container(
        settings=settings,
        engine=engine,
        receiver=receiver,
        push_format=push_format,
        publisher=publisher or build_publisher(settings, engine=engine, clock=clock),
        renderer=renderer,
        sweep_limits=SweepLimits(
            batch_size=settings.sweep_batch_size,
            time_budget_seconds=settings.sweep_time_budget_seconds,
            claim_seconds=settings.sweep_claim_seconds,
        ),
        clock=clock,
        http=http,
    )


def _unsubscribe_links(settings: Settings) -> UnsubscribeLinks | None:
    secret = settings.unsubscribe_secret.get_secret_value()
    return UnsubscribeLinks(settings.public_base_url, secret.encode()) if secret else None


def start_embedded_work(container: Container) -> BackgroundWork:
    """Start the embedded queue's dispatcher and sweep timer with the container's parts."""
    return start_background(
        container.settings,
        container.engine,
        container.publisher,
        clock=container.clock,
        rand=container.receiver.rand,
        queue_for=container.queue_for,
        sweep_limits=container.sweep_limits,
    )


def create_app(
    settings: Settings | None = None,
    *,
    container: Container | None = None,
    background: bool | None = None,
) -> FastAPI:
    """The FastAPI application; pass a prepared container to inject clocks and fakes.

    ``background``: run the embedded queue's dispatcher and sweep timer in this process when
    the settings ask for it (default: only when no container was injected).
    """
    in_background = container is None if background is None else background

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        built = container or build_container(settings or Settings())
        app.state.container = built
        configure_logging(built.settings.log_level)
        work = None
        if in_background and runs_in_serve(built.settings):
            work = start_embedded_work(built)
        try:
            yield
        finally:
            if work is not None:
                await work.stop()  # before the engine goes: in-flight rounds finish
            if container is None:
                await close_publisher(built.publisher)
                await built.engine.dispose()
                if built.http is not None:
                    await built.http.aclose()

    app = FastAPI(title="reminder-relay", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    for module in (push, cron, reminders, schedules, health, unsubscribe):
        app.include_router(module.router)
    install_operations(app)
    return app
