"""The composition root: ``open_container(settings)`` builds every long-lived object once
and closes all of them once, for the FastAPI lifespan, every CLI command and the demo."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.channels.http import SharedHttp
from app.adapters.channels.registry import build_chains
from app.adapters.channels.ssrf import TargetCheck
from app.adapters.channels.webhook import WebhookProvider
from app.adapters.email_events.registry import build_event_sources
from app.adapters.queues.registry import build_publisher, build_push_formats, close_publisher
from app.adapters.rendering import Renderer
from app.db.engine import connection_budget, create_engine
from app.db.ledger import ledger_for
from app.db.suppressions import DbSuppressionList
from app.domain.clock import utc_now
from app.domain.failover import CircuitBreaker
from app.domain.ports import EmailEventSource, PushFormat, QueuePublisher
from app.domain.retry import RandomSource
from app.domain.throttle import AuthThrottle
from app.domain.unsubscribe import UnsubscribeLinks
from app.observability.metrics import instrument_chains
from app.observability.tracing import enable_tracing, instrument_libraries
from app.services.catchup import CatchUpLimits
from app.services.ledger_metrics import LedgerMetrics
from app.services.receive import DeliveryPolicy, Receiver, SentKeys
from app.services.retention import RetentionPolicy
from app.services.sweep import SweepLimits, SweepReport, sweep
from app.settings import Settings


@dataclass
class Container:  # not frozen: tests swap parts (e.g. providers) after building
    """What the lifespan (or a command) builds once and every request shares."""

    settings: Settings
    engine: AsyncEngine
    receiver: Receiver
    push_formats: Mapping[str, PushFormat]  # by queue name: the only names /push serves
    publisher: QueuePublisher
    renderer: Renderer
    sweep_limits: SweepLimits
    clock: Callable[[], datetime]
    # /metrics' ledger gauges, refreshed by one background task (services/ledger_metrics.py)
    ledger_metrics: LedgerMetrics
    # /readyz' own connection: no load on the shared pool can make the probe fail
    readiness_engine: AsyncEngine
    # failed credential checks per client address and overall (domain/throttle.py)
    auth_throttle: AuthThrottle
    http: SharedHttp | None = None  # the one pooled outbound HTTP client
    # Provider event webhooks by provider: the only names /events/email/{provider} serves.
    event_sources: Mapping[str, EmailEventSource] = field(default_factory=dict)
    # The webhook provider's SSRF guard, asked at registration (None: no guard sends, e.g.
    # the outbox writes webhooks to files, so every URL is deliverable).
    webhook_targets: TargetCheck | None = None
    _exits: AsyncExitStack = field(default_factory=AsyncExitStack, repr=False)

    def queue_for(self, channel: str) -> str:
        """The queue a channel's messages go to (REMINDERS_EMAIL_QUEUE / _WEBHOOK_QUEUE)."""
        return self.settings.queue_for_channel(channel)

    async def sweep(self) -> SweepReport:
        """One bounded sweep with this service's publisher and limits."""
        return await sweep(
            self.engine,
            self.publisher,
            queue_for=self.queue_for,
            clock=self.clock,
            limits=self.sweep_limits,
            retention=self.retention(),
        )

    def retention(self) -> RetentionPolicy | None:
        """REMINDERS_RETENTION_DAYS as a policy (None when 0: keep everything)."""
        days, batch_size = self.settings.retention_days, self.settings.retention_batch_size
        return RetentionPolicy(days, batch_size) if days > 0 else None

    def close_with(self, close: Callable[[], Awaitable[object]]) -> None:
        """Close something a command built beside the container (a pusher, an API client)
        when the container closes, before the engine and the pools it may still use."""
        self._exits.push_async_callback(close)

    async def aclose(self) -> None:
        """Close everything once, last built first; a second call does nothing.

        Order: what commands attached, the publisher (its HTTP client), the shared HTTP
        pool, then the engine (whose disposal also closes the ledger's connections).
        Every step runs even when an earlier one fails; the first failure is raised.
        """
        await self._exits.aclose()


def build_container(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utc_now,
    rand: RandomSource | None = None,
    publisher: QueuePublisher | None = None,
) -> Container:
    """Every long-lived object of the service, wired from settings (tests inject parts).

    The caller owns it: ``await container.aclose()`` (``open_container`` does that).
    """
    budget = connection_budget(settings.database_url, settings.database_pool_size)
    engine = create_engine(settings.database_url, pool_size=budget.engine)
    readiness_engine = create_engine(settings.database_url, pool_size=budget.readiness)
    http = SharedHttp(max_connections=settings.http_max_connections)
    renderer = Renderer(settings.templates_dir, unsubscribe_links=_unsubscribe_links(settings))
    built = build_chains(settings, http=http)
    # The registration check needs the webhook provider itself, not its metrics wrapper.
    webhook = built["webhook"][0] if "webhook" in built else None
    chains = instrument_chains(built)
    providers = {channel: chain[0] for channel, chain in chains.items()}
    failover = {channel: chain for channel, chain in chains.items() if len(chain) > 1}
    ledger = ledger_for(
        engine,
        raw_connections=budget.raw_ledger,
        statements_in_flight=settings.database_group_statements,
    )
    receiver = Receiver(
        ledger=ledger,
        providers=providers,
        chains=failover,
        breakers={
            provider.name: CircuitBreaker(settings.breaker_policy)
            for chain in failover.values()
            for provider in chain
        },
        renderer=renderer,
        policy=_delivery_policy(settings),
        clock=clock,
        rand=rand or random.SystemRandom(),
        suppressions=DbSuppressionList(engine, ledger),
    )
    container = Container(
        settings=settings,
        engine=engine,
        receiver=receiver,
        push_formats=build_push_formats(settings, http=http),
        publisher=publisher or build_publisher(settings, engine=engine, clock=clock, http=http),
        renderer=renderer,
        sweep_limits=SweepLimits(
            batch_size=settings.sweep_batch_size,
            time_budget_seconds=settings.sweep_time_budget_seconds,
            claim_seconds=settings.sweep_claim_seconds,
            workers=settings.sweep_workers,
            catch_up=CatchUpLimits(
                margin=timedelta(seconds=settings.catchup_margin_seconds),
                batch_size=settings.sweep_batch_size,
            ),
        ),
        clock=clock,
        http=http,
        event_sources=build_event_sources(settings, http),
        webhook_targets=webhook.target_check if isinstance(webhook, WebhookProvider) else None,
        ledger_metrics=LedgerMetrics(
            engine,
            clock=clock,
            interval_seconds=settings.metrics_interval_seconds,
            # A reading (the gauges and the whole audit) may take up to one interval: the
            # readiness probe's 2 s was too short for a large ledger or a busy database,
            # which then showed reminders_ledger_up 0 on every scrape.
            timeout_seconds=settings.metrics_interval_seconds,
        ),
        readiness_engine=readiness_engine,
        auth_throttle=AuthThrottle(
            per_client=settings.auth_failures_per_client,
            overall=settings.auth_failures_global,
            window_seconds=settings.auth_failure_window_seconds,
        ),
    )
    # Pushed first, so closed last: the engine outlives everything that may still use it.
    container.close_with(engine.dispose)
    container.close_with(readiness_engine.dispose)
    if settings.otel_enabled:
        _trace(container, engine)
    container.close_with(http.aclose)
    for provider in {id(p): p for chain in chains.values() for p in chain}.values():
        close = getattr(provider, "aclose", None)  # SES: its own AWS client
        if close is not None:
            container.close_with(close)
    container.close_with(lambda: close_publisher(container.publisher))
    # Closed first: claims still being worked on end before the pools they use close.
    container.close_with(lambda: container.receiver.drain())
    return container


def _trace(container: Container, engine: AsyncEngine) -> None:
    # One tracer provider per process (the app's instrumentation shares it); its spans are
    # flushed when the container closes, after the engine's last statements.
    provider = enable_tracing()
    instrument_libraries(provider, engine=engine)

    async def flush() -> None:
        provider.force_flush()

    container.close_with(flush)


@asynccontextmanager
async def open_container(
    settings: Settings,
    *,
    clock: Callable[[], datetime] = utc_now,
    rand: RandomSource | None = None,
    publisher: QueuePublisher | None = None,
) -> AsyncIterator[Container]:
    """The service's objects for the duration of the block, all closed once at its end."""
    container = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    try:
        yield container
    finally:
        await container.aclose()


def _delivery_policy(settings: Settings) -> DeliveryPolicy:
    return DeliveryPolicy(
        lease=timedelta(seconds=settings.lease_seconds),
        provider_timeout_seconds=settings.provider_timeout_seconds,
        max_attempts=settings.max_attempts,
        backoff=settings.backoff,
        usefulness_grace=timedelta(seconds=settings.usefulness_grace_seconds),
        sent_keys_seconds=SentKeys.seconds_for_retention(settings.retention_days),
    )


def _unsubscribe_links(settings: Settings) -> UnsubscribeLinks | None:
    secret = settings.unsubscribe_secret.get_secret_value()
    return UnsubscribeLinks(settings.public_base_url, secret.encode()) if secret else None
