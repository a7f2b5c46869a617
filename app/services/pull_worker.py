"""The pull worker (``reminders worker``): for deployments the queue cannot push to.

It consumes from the configured queues and hands each message to the SAME receiver core
as ``POST /push/{queue}`` (``receive_delivery``), then turns the answer into the queue
verb the push route's HTTP status stands for: ack outcomes → ack (delete), nack outcomes
→ nack with the answer's ``Retry-After`` as delay (or, without a nack route, nothing: the
visibility timeout redelivers). The visibility timeout must exceed the claim lease so a
message never reappears while its claim is still trusted.

Acks happen after ``receive_delivery`` returned, i.e. after its finalize committed. A
crash in between redelivers the message; the ledger answers ``duplicate`` and it is acked.
Stopping (SIGTERM) lets in-flight deliveries finish and ack, then returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from app.domain.errors import ReminderRelayError
from app.domain.messages import Delivery
from app.domain.ports import QueueConsumer
from app.domain.retry import BackoffPolicy, RandomSource
from app.observability import record_delivery
from app.services.receive import Answer, Receiver, receive_delivery

log = logging.getLogger("reminders.worker")


@dataclass(frozen=True, slots=True)
class PullWorkerConfig:
    """What the worker consumes and how it waits when there is nothing to do."""

    queues: tuple[str, ...]
    max_messages: int = 10
    visibility_timeout: int = 120
    # Empty polls back off from the base up to the cap (full jitter, floor = base).
    idle_backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(1.0, 30.0, 1.0))


@dataclass
class WorkerStats:
    """Counters of one worker run (also printed when it stops)."""

    polls: int = 0
    deliveries: int = 0
    acked: int = 0
    nacked: int = 0
    left_to_expire: int = 0
    errors: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


async def run_pull_worker(
    receiver: Receiver,
    consumer: QueueConsumer,
    config: PullWorkerConfig,
    *,
    stop: asyncio.Event,
    rand: RandomSource,
    wait: Callable[[float], Awaitable[None]] | None = None,
) -> WorkerStats:
    """Poll until ``stop`` is set; back off while every queue is empty."""
    stats = WorkerStats()
    idle_wait = wait or (lambda seconds: wait_or_stop(stop, seconds))
    idle_rounds = 0
    while not stop.is_set():
        handled = await poll_once(receiver, consumer, config, stats)
        if handled:
            idle_rounds = 0
            continue
        idle_rounds += 1
        await idle_wait(config.idle_backoff.delay(idle_rounds, rand))
    return stats


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep up to ``seconds``, returning at once when ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def poll_once(
    receiver: Receiver, consumer: QueueConsumer, config: PullWorkerConfig, stats: WorkerStats
) -> int:
    """One consume per queue; every message handled concurrently. Returns how many."""
    handled = 0
    for queue in config.queues:
        stats.polls += 1
        try:
            deliveries = await consumer.consume(
                queue,
                max_messages=config.max_messages,
                visibility_timeout=config.visibility_timeout,
            )
        except ReminderRelayError as error:
            stats.errors += 1
            log.error("consume from %s failed: %s", queue, error)
            continue
        await handle_deliveries(receiver, consumer, deliveries, stats)
        handled += len(deliveries)
    return handled


async def handle_deliveries(
    receiver: Receiver, consumer: QueueConsumer, deliveries: Sequence[Delivery], stats: WorkerStats
) -> None:
    """Handle a consumed batch concurrently: all within one visibility timeout."""
    results = await asyncio.gather(
        *(handle_delivery(receiver, consumer, d, stats) for d in deliveries),
        return_exceptions=True,
    )
    for delivery, result in zip(deliveries, results, strict=True):
        if isinstance(result, BaseException):
            # Not acked: the visibility timeout redelivers it, the ledger absorbs repeats.
            stats.errors += 1
            log.error("delivery %s on %s failed: %r", delivery.message_id, delivery.queue, result)


async def handle_delivery(
    receiver: Receiver, consumer: QueueConsumer, delivery: Delivery, stats: WorkerStats
) -> Answer:
    """Run the receiver core on one message, then ack or nack it."""
    started = time.perf_counter()
    answer = await receive_delivery(receiver, delivery)
    record_delivery(delivery, answer, time.perf_counter() - started)
    stats.deliveries += 1
    stats.outcomes[answer.outcome.value] += 1
    if answer.outcome.acknowledges:
        await consumer.ack(delivery.queue, delivery.message_id)
        stats.acked += 1
        return answer
    delay = max(1, math.ceil(answer.retry_after or 1))
    if await consumer.nack(delivery.queue, delivery.message_id, delay=delay):
        stats.nacked += 1
    else:
        stats.left_to_expire += 1
    return answer
