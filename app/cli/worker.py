"""``reminders worker --queue Q``: pull from the queues and deliver (no public endpoint).

Thin: reads the settings, builds the consumer of the queues' kind (Infrai, SQS, RabbitMQ),
runs the one worker loop of ``app/services/pull_worker.py`` until SIGTERM or SIGINT, and
prints what it did. Run it beside ``reminders serve`` (same image) or alone.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer
from rich.console import Console

from app.adapters.queues.consumers import build_consumer
from app.adapters.queues.kinds import KINDS_BY_NAME
from app.api.worker_metrics import serving_worker_metrics
from app.cli.common import command_container, fail, load_settings
from app.collector import tune_for_delivery
from app.domain.errors import ConfigError
from app.domain.retry import BackoffPolicy
from app.services.pull_worker import PullWorkerConfig, WorkerStats, run_pull_worker
from app.settings import Settings

console = Console()


def worker_command(
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue", "-q", help="Queue name to consume (repeatable). Default: every channel's."
        ),
    ] = None,
) -> None:
    """Pull from the configured queues and deliver through the receiver; SIGTERM stops."""
    settings = load_settings()
    queues = tuple(queue or sorted(set(settings.channel_queues.values())))
    kind = queue_kind(settings, queues)
    try:
        config = worker_config(settings, kind, queues)
    except ConfigError as error:
        fail(str(error))
    stats = asyncio.run(_run_worker(settings, kind, config))
    console.print(
        f"worker stopped: {stats.deliveries} deliveries, {stats.acked} acked, "
        f"{stats.nacked} nacked, {stats.given_back} given back, "
        f"{stats.left_to_expire} left to expire, {stats.errors} errors"
    )


def queue_kind(settings: Settings, queues: tuple[str, ...]) -> str:
    """The one kind of the queues a worker consumes, or exit naming the problem."""
    kinds = settings.queue_kinds
    unknown = [q for q in queues if q not in kinds]
    if unknown:
        fail(f"no channel uses queue {unknown[0]!r}; configured: {', '.join(sorted(kinds))}")
    used = {kinds[q] for q in queues}
    if len(used) > 1:
        fail(f"one worker consumes one queue kind; got {', '.join(sorted(used))}: run one each")
    return used.pop()


def worker_config(settings: Settings, kind: str, queues: tuple[str, ...]) -> PullWorkerConfig:
    """The worker loop's configuration: REMINDERS_WORKER_*, then what the kind sets."""
    worker = settings.worker
    knobs = {
        "max_in_flight": worker.max_in_flight,
        "wait_seconds": worker.wait_seconds,
        "visibility_timeout": worker.visibility_timeout(settings.lease_seconds),
        "reconnect_backoff": BackoffPolicy(0.5, worker.reconnect_max_seconds, 0.5),
    }
    found = KINDS_BY_NAME.get(kind)
    if found is not None and found.worker_knobs is not None:
        knobs.update(found.worker_knobs(settings))
    return PullWorkerConfig(queues=queues, **knobs)  # type: ignore[arg-type]


async def _run_worker(settings: Settings, kind: str, config: PullWorkerConfig) -> WorkerStats:
    queues = config.queues
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    console.print(
        f"worker consuming {kind} {', '.join(queues)} "
        f"(in flight ≤ {config.max_in_flight}, lease {config.visibility_timeout} s)"
    )
    async with command_container(settings) as container:
        try:
            consumer = build_consumer(kind, settings, container.http)
        except ConfigError as error:
            fail(str(error))
        async with serving_worker_metrics(container):
            tune_for_delivery()
            return await run_pull_worker(
                container.receiver, consumer, config, stop=stop, rand=container.receiver.rand
            )
