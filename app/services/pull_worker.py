"""The pull worker (``reminders worker --queue Q``): one loop for every pull queue kind.

It receives from the configured queues through a ``PullConsumer`` (Infrai, SQS, RabbitMQ)
and hands each message to the SAME receiver core as ``POST /push/{queue}``
(``receive_delivery``), then turns the answer into the queue verb the push route's HTTP
status stands for: ack outcomes → ack (delete), nack outcomes → nack with the answer's
``Retry-After`` as delay (or, without a nack route, nothing: the lease expiry redelivers).

* Bounded prefetch: at most ``max_in_flight`` messages are leased and not yet settled; the
  loop receives only what fits.
* Ack after finalize: ``receive_delivery`` returns after its finalize committed; a crash
  before the ack redelivers the message and the ledger answers ``duplicate``.
* A message's queue lease is extended every third of its length while its send runs, so
  a slow send is never handed to a second worker by the queue.
* SIGTERM (``stop``): receive no more, give back what was received and not started, let
  started deliveries finish and settle, close the consumer.
* A queue that cannot be reached (``QueueUnavailable`` or a connection error) is retried
  with capped, jittered backoff; the consumer reconnects on the next call.
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

from app.domain.errors import QueueUnavailable, ReminderRelayError
from app.domain.messages import PulledMessage
from app.domain.ports import PullConsumer
from app.domain.retry import BackoffPolicy, RandomSource
from app.observability.metrics import record_delivery
from app.observability.worker_metrics import record_backlog, record_message
from app.services.receive import Answer, Receiver, receive_delivery

log = logging.getLogger("reminders.worker")
# Errors after which the queue is called again after a pause (a broker or network failure).
RECONNECTABLE = (QueueUnavailable, ConnectionError, OSError, TimeoutError)


@dataclass(frozen=True, slots=True)
class PullWorkerConfig:
    """What the worker consumes, how much it holds at once and how it waits."""

    queues: tuple[str, ...]
    max_messages: int = 10  # per receive call (SQS allows at most 10)
    max_in_flight: int = 32  # leased and not yet settled, across queues
    visibility_timeout: int = 120  # the queue lease; above the claim lease
    wait_seconds: float = 10.0  # long polling, for consumers that wait themselves
    # Empty polls of a consumer that does not wait itself back off (full jitter, floor = base).
    idle_backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(1.0, 30.0, 1.0))
    # A queue that cannot be reached is called again after this backoff.
    reconnect_backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(0.5, 30.0, 0.5))


@dataclass
class WorkerStats:
    """Counters of one worker run (also printed when it stops)."""

    polls: int = 0
    deliveries: int = 0
    acked: int = 0
    nacked: int = 0
    left_to_expire: int = 0
    given_back: int = 0
    errors: int = 0
    reconnects: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


async def run_pull_worker(
    receiver: Receiver,
    consumer: PullConsumer,
    config: PullWorkerConfig,
    *,
    stop: asyncio.Event,
    rand: RandomSource,
    wait: Callable[[float], Awaitable[None]] | None = None,
) -> WorkerStats:
    """Receive and deliver until ``stop`` is set, then drain and close the consumer."""
    loop = _Loop(receiver, consumer, config, stop, rand, wait or _waiter(stop))
    try:
        await loop.run()
    finally:
        await loop.drain()
        with contextlib.suppress(*RECONNECTABLE, ReminderRelayError):
            await consumer.close()
    return loop.stats


@dataclass
class _Loop:
    receiver: Receiver
    consumer: PullConsumer
    config: PullWorkerConfig
    stop: asyncio.Event
    rand: RandomSource
    wait: Callable[[float], Awaitable[None]]
    stats: WorkerStats = field(default_factory=WorkerStats)
    in_flight: set[asyncio.Task[None]] = field(default_factory=set)
    idle_rounds: int = 0
    failures: int = 0

    @property
    def lease(self) -> int | None:
        return lease_of(self.consumer, self.config)

    async def run(self) -> None:
        while not self.stop.is_set():
            room = self.config.max_in_flight - len(self.in_flight)
            if room <= 0:
                await asyncio.wait(self.in_flight, return_when=asyncio.FIRST_COMPLETED)
                continue
            received = 0
            for queue in self.config.queues:
                received += await self._receive_and_start(queue, room)
                room = self.config.max_in_flight - len(self.in_flight)
                if self.stop.is_set() or room <= 0:
                    break
            await self._after_round(received)

    async def _receive_and_start(self, queue: str, room: int) -> int:
        messages = await self._receive(queue, min(room, self.config.max_messages))
        if self.stop.is_set():
            await _give_back(self.consumer, messages, self.stats)
            return 0
        for message in messages:
            task = asyncio.create_task(
                settle(self.receiver, self.consumer, message, self.stats, lease=self.lease)
            )
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        return len(messages)

    async def _receive(self, queue: str, count: int) -> list[PulledMessage]:
        """One receive that a stop cuts short; a failure counted for the backoff."""
        receiving = asyncio.ensure_future(receive(self.consumer, self.config, queue, count))
        stopping = asyncio.ensure_future(self.stop.wait())
        await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not receiving.done():
            # What the cancelled call had leased returns when its lease ends.
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError, *RECONNECTABLE):
                await receiving
            return []
        self.stats.polls += 1
        try:
            messages = receiving.result()
        except (*RECONNECTABLE, ReminderRelayError) as error:
            self.failures += 1
            self.stats.errors += 1
            log.error("receive from %s failed (%s): %s", queue, type(error).__name__, error)
            return []
        if self.failures:
            self.stats.reconnects += 1
            log.info("receiving from %s again", queue)
        self.failures = 0
        return messages

    async def _after_round(self, received: int) -> None:
        if self.failures:
            await self.wait(self.config.reconnect_backoff.delay(self.failures, self.rand))
        elif received:
            self.idle_rounds = 0
        elif not self.consumer.long_polls:
            self.idle_rounds += 1
            await self.wait(self.config.idle_backoff.delay(self.idle_rounds, self.rand))
        if not received:
            await _record_backlogs(self.consumer, self.config.queues)

    async def drain(self) -> None:
        """Let started deliveries finish and settle (SIGTERM lets them run to the ack)."""
        if self.in_flight:
            await asyncio.gather(*self.in_flight, return_exceptions=True)


async def receive(
    consumer: PullConsumer, config: PullWorkerConfig, queue: str, count: int
) -> list[PulledMessage]:
    """One receive call with the configured lease and wait; counted per queue."""
    messages = await consumer.receive(
        queue,
        max_messages=count,
        lease_seconds=config.visibility_timeout,
        wait_seconds=config.wait_seconds if consumer.long_polls else 0.0,
    )
    for _ in messages:
        record_message(queue, "received")
    return messages


async def poll_once(
    receiver: Receiver, consumer: PullConsumer, config: PullWorkerConfig, stats: WorkerStats
) -> int:
    """One receive per queue, every message settled before it returns. Returns how many."""
    handled = 0
    for queue in config.queues:
        stats.polls += 1
        try:
            messages = await receive(consumer, config, queue, config.max_messages)
        except (*RECONNECTABLE, ReminderRelayError) as error:
            stats.errors += 1
            log.error("receive from %s failed: %s", queue, error)
            continue
        lease = lease_of(consumer, config)
        await asyncio.gather(*(settle(receiver, consumer, m, stats, lease=lease) for m in messages))
        handled += len(messages)
    return handled


def lease_of(consumer: PullConsumer, config: PullWorkerConfig) -> int | None:
    """The queue lease the worker keeps extending, None when the queue has none."""
    return config.visibility_timeout if consumer.leases else None


async def settle(
    receiver: Receiver,
    consumer: PullConsumer,
    message: PulledMessage,
    stats: WorkerStats,
    *,
    lease: int | None = None,
) -> None:
    """Deliver one message and ack or nack it; a failure leaves it to the queue's redelivery."""
    delivery = message.delivery
    try:
        await handle_message(receiver, consumer, message, stats, lease=lease)
    except Exception as error:
        # Not acked: the lease expiry (or the broker) redelivers it, the ledger absorbs repeats.
        stats.errors += 1
        record_message(delivery.queue, "failed")
        log.error("delivery %s on %s failed: %r", delivery.message_id, delivery.queue, error)
        with contextlib.suppress(*RECONNECTABLE, ReminderRelayError):
            await consumer.abandon(message)


async def handle_message(
    receiver: Receiver,
    consumer: PullConsumer,
    message: PulledMessage,
    stats: WorkerStats,
    *,
    lease: int | None = None,
) -> Answer:
    """Run the receiver core on one message (its lease kept), then ack or nack it."""
    delivery = message.delivery
    started = time.perf_counter()
    answer = await _with_lease(consumer, message, lease, receive_delivery(receiver, delivery))
    record_delivery(delivery, answer, time.perf_counter() - started)
    stats.deliveries += 1
    stats.outcomes[answer.outcome.value] += 1
    if answer.outcome.acknowledges:
        await consumer.ack(message)
        stats.acked += 1
        record_message(delivery.queue, "acked")
        return answer
    delay = max(1, math.ceil(answer.retry_after or 1))
    if await consumer.nack(message, delay=delay):
        stats.nacked += 1
        record_message(delivery.queue, "nacked")
    else:
        stats.left_to_expire += 1
    return answer


async def _with_lease(
    consumer: PullConsumer, message: PulledMessage, lease: int | None, work: Awaitable[Answer]
) -> Answer:
    """Await ``work`` while the message's queue lease is extended every third of it."""
    if not lease:
        return await work
    keeper = asyncio.create_task(_keep_lease(consumer, message, lease))
    try:
        return await work
    finally:
        keeper.cancel()


async def _keep_lease(consumer: PullConsumer, message: PulledMessage, lease: int) -> None:
    while True:
        await asyncio.sleep(lease / 3)
        try:
            await consumer.extend_lease(message, seconds=lease)
        except (*RECONNECTABLE, ReminderRelayError) as error:
            log.warning("lease of %s not extended: %s", message.delivery.message_id, error)


async def _give_back(
    consumer: PullConsumer, messages: Sequence[PulledMessage], stats: WorkerStats
) -> None:
    if not messages:
        return
    try:
        await consumer.give_back(messages)
    except (*RECONNECTABLE, ReminderRelayError) as error:
        log.warning("could not give back %d messages (their lease ends): %s", len(messages), error)
    stats.given_back += len(messages)
    for message in messages:
        record_message(message.delivery.queue, "given_back")


async def _record_backlogs(consumer: PullConsumer, queues: Sequence[str]) -> None:
    for queue in queues:
        with contextlib.suppress(*RECONNECTABLE, ReminderRelayError):
            record_backlog(queue, await consumer.backlog(queue))


def _waiter(stop: asyncio.Event) -> Callable[[float], Awaitable[None]]:
    async def wait(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=seconds)

    return wait
