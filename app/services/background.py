"""Work beside the HTTP API on one machine: the embedded queue's dispatcher and a sweep timer.

``reminders serve`` starts it from the app's lifespan when the embedded queue is
configured (``REMINDERS_EMBEDDED_DISPATCH_IN_SERVE``, default on), delivering each message
to the receiver in this process (``REMINDERS_EMBEDDED_DELIVER_IN_PROCESS``, default on)
rather than over HTTP to itself: same receiver, same answers, no round trip. A one-machine
deployment has no cloud cron, so the same process also sweeps every
``REMINDERS_EMBEDDED_SWEEP_INTERVAL_SECONDS`` (0 turns it off; ``POST /cron/sweep`` still
works, and concurrent sweeps never publish a row twice). Stopping is graceful: the current
dispatcher round finishes its in-flight pushes; a round still running after the grace
period is cancelled and its messages are delivered again after the visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.embedded.configured import dispatcher_from_settings
from app.adapters.queues.embedded.local import LocalAnswer, LocalDelivery
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import AiohttpPusher
from app.db.queue_claim import RoundStatements
from app.db.queue_repo import ClaimedMessage
from app.domain.messages import Delivery
from app.domain.ports import QueuePublisher
from app.domain.retry import RandomSource
from app.observability.metrics import record_delivery, record_sweep
from app.services.receive import Receiver
from app.services.receive_batch import receive_batch
from app.services.sweep import SweepLimits, SweepReport, sweep
from app.settings import Settings

log = logging.getLogger("reminders.background")


@dataclass
class BackgroundWork:
    """Running background tasks and what to close once they end."""

    stop_event: asyncio.Event
    grace_seconds: float
    tasks: list[asyncio.Task[object]] = field(default_factory=list)
    pusher: AiohttpPusher | None = None

    async def stop(self) -> None:
        """Let the current rounds finish (bounded by the grace period), then close."""
        self.stop_event.set()
        if self.tasks:
            _, pending = await asyncio.wait(self.tasks, timeout=self.grace_seconds)
            for task in pending:  # their claimed messages redeliver after the visibility timeout
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self.pusher is not None:
            await self.pusher.close()


def runs_in_serve(settings: Settings) -> bool:
    """True when ``reminders serve`` should run the dispatcher and the sweep timer."""
    return "embedded" in settings.queue_kinds_in_use and settings.embedded.dispatch_in_serve


def start_background(
    settings: Settings,
    engine: AsyncEngine,
    publisher: QueuePublisher,
    *,
    clock: Callable[[], datetime],
    rand: RandomSource,
    queue_for: Callable[[str], str],
    sweep_limits: SweepLimits,
    local: LocalDelivery | None = None,
    statements: RoundStatements | None = None,
) -> BackgroundWork:
    """Start the dispatcher loop (in process with ``local``, else over HTTP) and, when
    configured, the periodic sweep."""
    embedded = settings.embedded
    dispatcher, pusher = dispatcher_from_settings(
        settings, engine, clock=clock, rand=rand, local=local, statements=statements
    )
    if isinstance(publisher, EmbeddedQueuePublisher):
        publisher.on_publish(dispatcher.wake)  # deliver at once instead of at the next poll
    work = BackgroundWork(
        asyncio.Event(), grace_seconds=settings.embedded_push_timeout + 5, pusher=pusher
    )
    work.tasks.append(
        asyncio.create_task(
            dispatcher.run(work.stop_event, poll_interval=embedded.poll_interval_seconds),
            name="embedded-dispatcher",
        )
    )
    if embedded.sweep_interval_seconds > 0:

        async def run_sweep() -> SweepReport:
            return await sweep(
                engine, publisher, queue_for=queue_for, clock=clock, limits=sweep_limits
            )

        work.tasks.append(
            asyncio.create_task(
                sweep_periodically(
                    run_sweep, every=embedded.sweep_interval_seconds, stop=work.stop_event
                ),
                name="periodic-sweep",
            )
        )
    log.info(
        "embedded queue: dispatching to %s (concurrency %d), sweeping every %s s",
        "the receiver in this process" if local else dispatcher.target.base_url,
        embedded.concurrency,
        embedded.sweep_interval_seconds or "never",
    )
    return work


def deliver_in_process(receiver: Callable[[], Receiver]) -> LocalDelivery:
    """What ``POST /push/{queue}`` does once a push is authenticated, called directly for a
    round's messages together (``receive_batch``): the receiver decides for each, and each
    delivery is counted and logged as the route would."""

    async def deliver(
        messages: Sequence[ClaimedMessage],
    ) -> list[LocalAnswer | BaseException]:
        deliveries = [
            Delivery(message.queue, message.message_id, message.payload, message.attempts)
            for message in messages
        ]
        started = time.perf_counter()
        results = await receive_batch(receiver(), deliveries)
        elapsed = time.perf_counter() - started  # each answer came at the batch's end
        answers: list[LocalAnswer | BaseException] = []
        for delivery, result in zip(deliveries, results, strict=True):
            if isinstance(result, BaseException):
                answers.append(result)
                continue
            record_delivery(delivery, result, elapsed, route="in-process")
            answers.append(
                LocalAnswer(result.outcome.acknowledges, result.outcome.value, result.retry_after)
            )
        return answers

    return deliver


async def sweep_periodically(
    run_sweep: Callable[[], Awaitable[SweepReport]], *, every: float, stop: asyncio.Event
) -> None:
    """Sweep now and then every ``every`` seconds until ``stop`` is set."""
    while not stop.is_set():
        try:
            report = await run_sweep()
        except Exception:  # the next tick tries again; a sweep never loses rows
            log.exception("periodic sweep failed")
        else:
            record_sweep(report)  # the same metrics and log line as POST /cron/sweep
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=every)
