"""Application factory: ``create_app(settings)``; the lifespan opens the container once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from app.collector import tune_for_delivery
from app.container import Container, open_container
from app.db.queue_pg import queue_statements_for
from app.observability.logs import configure_logging
from app.observability.metrics import prime_series
from app.observability.startup import announce
from app.observability.tracing import enable_tracing, instrument_app
from app.services.background import (
    BackgroundWork,
    deliver_in_process,
    runs_in_serve,
    start_background,
)
from app.settings import Settings

from .api import (
    batch,
    cron,
    dead_letters,
    email_events,
    health,
    push,
    reminders,
    schedules,
    suppressions,
    templates,
    unsubscribe,
)
from .api.docs import install_docs
from .api.errors import install_error_handlers
from .api.guard import RequestGuard
from .api.openapi import install_openapi, operation_id
from .api.operations import install_operations
from .api.push_entry import ReminderRelayApp


def start_embedded_work(container: Container) -> BackgroundWork:
    """Start the embedded queue's dispatcher and sweep timer with the container's parts."""
    in_process = container.settings.embedded.deliver_in_process
    return start_background(
        container.settings,
        container.engine,
        container.publisher,
        clock=container.clock,
        rand=container.receiver.rand,
        queue_for=container.queue_for,
        sweep_limits=container.sweep_limits,
        local=deliver_in_process(lambda: container.receiver) if in_process else None,
        statements=queue_statements_for(container.receiver.ledger),
    )


def create_app(
    settings: Settings | None = None,
    *,
    container: Container | None = None,
    background: bool | None = None,
) -> FastAPI:
    """The FastAPI application; pass a prepared container to inject clocks and fakes.

    An injected container stays its caller's to close; otherwise the lifespan opens one
    and closes it at shutdown. ``background``: run the embedded queue's dispatcher and
    sweep timer in this process when the settings ask for it (default: only when no
    container was injected).
    """
    in_background = container is None if background is None else background
    if container is None and settings is None:
        settings = Settings()  # once, here: tracing must wrap the app before it starts
    chosen = container.settings if container is not None else settings
    assert chosen is not None
    prime_series(chosen.channel_queues)  # alerts read these series before any event

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            built = container
            if built is None:
                assert settings is not None
                built = await stack.enter_async_context(open_container(settings))
            app.state.container = built
            configure_logging(built.settings.log_level, log_format=built.settings.log_format)
            if container is None:  # this process's own: the line saying what it runs on
                await announce("reminders serve", built.settings, built.readiness_engine)
                tune_for_delivery()  # startup is over: what lives now lives as long as it
            if in_background:  # one task per process reads the ledger for /metrics
                stack.push_async_callback(built.ledger_metrics.start())
            if in_background and runs_in_serve(built.settings):
                # Stopped before the container closes: in-flight rounds finish first.
                stack.push_async_callback(start_embedded_work(built).stop)
            yield

    app = ReminderRelayApp(
        title="reminder-relay",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        docs_url=None,  # install_docs: the same pages, from installed assets (no CDN)
        redoc_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(
        RequestGuard,
        routers=[
            reminders.router,
            schedules.router,
            templates.router,
            dead_letters.router,
            suppressions.router,
            batch.router,
            email_events.router,
        ],
        larger_bodies=[
            (batch.router, batch.MAX_BATCH_BYTES),
            (email_events.router, email_events.MAX_EVENTS_BYTES),
        ],
    )
    for module in (
        push,
        cron,
        batch,
        email_events,
        reminders,
        schedules,
        templates,
        health,
        unsubscribe,
    ):
        app.include_router(module.router)
    install_operations(app)
    install_openapi(app)
    install_docs(app)
    if chosen is not None and chosen.otel_enabled:
        app.direct_push = False  # deliveries get server spans too: through the middleware
        instrument_app(app, enable_tracing())
    return app
