"""The embedded queue's dispatcher: claim due messages, push them, apply answers.

Each round is three phases, none holding a transaction across network I/O: claim (one
statement; ``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a conditional update on SQLite, so
several dispatchers never hold one message at once), push (concurrently, bounded, one
shared aiohttp session, the Infrai envelope signed as the receiver checks), then apply
every answer in one transaction: 2xx deletes; anything else schedules a redelivery or
moves the message to the dead-letter list. At-least-once: a claim only hides a message
for the visibility timeout, so a dispatcher that dies between the push and the delete
leaves it to be delivered again; the receiver's ledger absorbs the duplicate.

Pushing is HTTP by default (``reminders dispatch``, or a dispatcher in front of other
replicas). Where the receiver runs in the same process (``reminders serve``) the
dispatcher is given a ``LocalDelivery`` instead: the same receiver code, called directly,
with no HTTP round trip to itself, no signing and no JSON envelope. The answers, the
redelivery rules and the dead list are the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import queue_repo
from app.db.queue_claim import EngineRoundStatements, RoundStatements
from app.db.queue_repo import ClaimedMessage, ClaimPosition, FailedDelivery
from app.domain.queueing import (
    DEDUP_WINDOW,
    is_exhausted,
    redelivery_delay,
)
from app.domain.retry import BackoffPolicy, RandomSource, parse_retry_after

from .local import LocalDelivery, LocalHandOff
from .pusher import Pusher, PushFailed, PushResult, PushTarget

log = logging.getLogger("reminders.embedded_queue")
# Dead letters: error lines with fields, as the receiver's are (log-level alerting).
events = structlog.get_logger("reminders.embedded_queue")


# How long claims go on from a position before one starts from the index's start again.
RESUME_SECONDS = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class DispatchLimits:
    """How much a dispatcher does at once and how it spaces redeliveries."""

    concurrency: int = 128
    batch_size: int = 64
    visibility_timeout_seconds: float = 120.0
    push_timeout_seconds: float = 90.0
    backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(1.0, 300.0))
    housekeeping_every: timedelta = timedelta(seconds=60)
    # Rounds claimed ahead while earlier ones are delivered (``Dispatcher.run``).
    rounds_in_flight: int = 2


@dataclass
class DispatchReport:
    """What one or more rounds did."""

    claimed: int = 0
    acknowledged: int = 0
    redelivering: int = 0
    dead: int = 0
    expired: int = 0
    # Receiver outcomes named in the answers (sent, duplicate, retry, ...), or the status.
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, other: DispatchReport) -> None:
        """Accumulate another report into this one."""
        for name in ("claimed", "acknowledged", "redelivering", "dead", "expired"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.outcomes.update(other.outcomes)


class Dispatcher:
    """Pushes due messages of every queue in the table to ``target``."""

    def __init__(
        self,
        engine: AsyncEngine,
        pusher: Pusher | None,
        target: PushTarget,
        *,
        limits: DispatchLimits,
        clock: Callable[[], datetime],
        rand: RandomSource,
        wall_time: Callable[[], float] = time.time,
        local: LocalDelivery | None = None,
        statements: RoundStatements | None = None,
    ) -> None:
        if pusher is None and local is None:
            raise ValueError("a dispatcher needs a pusher or a local delivery")
        self.engine = engine
        # Each round's claim and acknowledgement: on the ledger's raw pool where ``serve``
        # gives one (PostgreSQL, ``queue_pg``), else transactions on the engine.
        self.statements = statements or EngineRoundStatements(engine)
        self.local = local  # set: deliver in process instead of over HTTP
        self.pusher = pusher
        self.target = target
        self.limits = limits
        self._clock = clock
        self._rand = rand
        self._wall_time = wall_time  # signature timestamps: the receiver checks wall time
        self._semaphore = asyncio.Semaphore(limits.concurrency)
        self._hand_off = None if local is None else LocalHandOff(
            local, self._semaphore, asyncio.Lock(), limits.concurrency,
            limits.push_timeout_seconds,
            stopping=lambda: self._stop is not None and self._stop.is_set(),
        )  # fmt: skip
        self._wake = asyncio.Event()
        self._stop: asyncio.Event | None = None  # run's; once set: start no more deliveries
        self._housekept_at: datetime | None = None
        # Where the last full claim ended, and when claims last started from the index's
        # start (``claim``).
        self._position: ClaimPosition | None = None
        self._positioned_since = datetime.min.replace(tzinfo=UTC)

    async def run_once(self, now: datetime | None = None) -> DispatchReport:
        """One round: housekeeping when due, then claim, push and apply one batch."""
        claim_at = now or self._clock()
        report = DispatchReport()
        await self.housekeep(claim_at, report)
        claimed = await self.claim(claim_at)
        if claimed:
            results = await self.push_all(claimed)
            await self.apply(results, now=now or self._clock(), report=report)
        return report

    async def claim(self, now: datetime) -> list[ClaimedMessage]:
        """Claim up to a batch of due messages for the visibility timeout.

        While the queue has a backlog each claim goes on from where the last full one
        ended, instead of entering the index at its start: there lie the entries of the
        messages already delivered (deleted, or moved by their claim), which PostgreSQL
        keeps until a vacuum and every claim from the start read again, more with every
        batch (1,530 buffer reads per claim, on average, over 100,000 messages). A claim
        from a position that comes back short is topped up from the start, and every
        ``RESUME_SECONDS`` a claim starts there anyway: a message that lies before the
        position (published by a process whose clock is behind, or skipped while another
        statement held it) waits at most that long behind a backlog."""
        visible_until = now + timedelta(seconds=self.limits.visibility_timeout_seconds)
        batch, after = self.limits.batch_size, self._resume_after(now)
        claimed = await self.statements.claim(
            now=now, visible_until=visible_until, limit=batch, after=after
        )
        self._remember_position(claimed, now, from_start=after is None)
        return claimed

    def _resume_after(self, now: datetime) -> ClaimPosition | None:
        if self._position is None or now - self._positioned_since >= RESUME_SECONDS:
            return None
        return self._position

    def _remember_position(
        self, claimed: list[ClaimedMessage], now: datetime, *, from_start: bool
    ) -> None:
        positions = [m.position for m in claimed if m.position is not None]
        if len(claimed) < self.limits.batch_size or not positions:  # no backlog, or SQLite
            self._position = None
            return
        if from_start:
            self._positioned_since = now
        self._position = max(positions)

    async def push_all(self, claimed: list[ClaimedMessage]) -> list[PushResult]:
        """Push every claimed message, at most ``concurrency`` at a time."""
        if self._hand_off is not None:  # in process: the receiver takes them together
            return await self._hand_off.push_all(claimed)
        return list(await asyncio.gather(*(self._push_bounded(m) for m in claimed)))

    async def _push_bounded(self, message: ClaimedMessage) -> PushResult:
        async with self._semaphore:
            if self._stop is not None and self._stop.is_set():  # graceful: finish, start none
                return PushResult(message, None, released=True)
            return await self.push(message)

    async def push(self, message: ClaimedMessage) -> PushResult:
        """POST one message in the Infrai envelope, signed; never raises for delivery
        failures."""
        assert self.pusher is not None  # in process, messages go by ``push_all``
        body = orjson.dumps(
            {
                "message_id": message.message_id,
                "payload": message.payload,
                "attempt": message.attempts,
            }
        )
        headers = self.target.headers(body, self._wall_time())
        try:
            answer = await self.pusher.post(
                self.target.url(message.queue),
                body,
                headers,
                timeout=self.limits.push_timeout_seconds,
            )
        except PushFailed as error:
            return PushResult(message, None, error=str(error))
        return PushResult(message, answer.status, answer.retry_after, answer.outcome)

    async def apply(
        self, results: list[PushResult], *, now: datetime, report: DispatchReport | None = None
    ) -> DispatchReport:
        """Delete acknowledged messages; schedule redeliveries or dead-letter the rest."""
        report = report or DispatchReport()
        released = [r.message for r in results if r.released]
        delivered = [r for r in results if not r.released]
        acked = [r.message.id for r in delivered if r.acknowledged]
        failed = [r for r in delivered if not r.acknowledged]
        failures = [self._failure(r, now) for r in failed]
        if not failures and not released:  # nearly every round
            await self.statements.delete(acked)
        else:
            async with self.engine.begin() as conn:
                await queue_repo.delete_messages(conn, acked)
                await queue_repo.record_failures(conn, failures, now=now)
                await queue_repo.release_messages(conn, released, now=now)
        for result, failure in zip(failed, failures, strict=True):
            if failure.visible_at is None:
                events.error(
                    "queue_dead_letter",
                    queue=result.message.queue,
                    message_id=result.message.message_id,
                    deliveries=result.message.attempts,
                    error_class=_label(result),
                )
        report.claimed += len(results)
        report.acknowledged += len(acked)
        report.dead += sum(1 for f in failures if f.visible_at is None)
        report.redelivering += sum(1 for f in failures if f.visible_at is not None)
        report.outcomes.update(_label(r) for r in delivered)
        return report

    def _failure(self, result: PushResult, now: datetime) -> FailedDelivery:
        message = result.message
        error = result.error or f"HTTP {result.status}" + (
            f" ({result.outcome})" if result.outcome else ""
        )
        if is_exhausted(message.attempts, message.max_retries):
            return FailedDelivery(message.id, message.attempts, result.status, error, None)
        delay = redelivery_delay(
            message.attempts,
            parse_retry_after(result.retry_after, now),
            self.limits.backoff,
            self._rand,
        )
        retry_at = now + timedelta(seconds=delay)
        return FailedDelivery(message.id, message.attempts, result.status, error, retry_at)

    async def housekeep(self, now: datetime, report: DispatchReport | None = None) -> None:
        """Now and then: dead-letter unanswered messages, drop expired ones, prune keys."""
        if (
            self._housekept_at is not None
            and now - self._housekept_at < self.limits.housekeeping_every
        ):
            return
        self._housekept_at = now
        async with self.engine.begin() as conn:
            unanswered = await queue_repo.kill_unanswered(conn, now=now)
            expired = await queue_repo.drop_expired(conn, now=now)
            await queue_repo.forget_keys(conn, before=now - DEDUP_WINDOW)
        for queue, message_id in unanswered:
            events.error(
                "queue_dead_letter", queue=queue, message_id=message_id, error_class="no_answer"
            )
        for row in expired:
            log.warning(
                "message %s on %s dropped: past its 30-day retention (%s, %d deliveries)",
                row["message_id"],
                row["queue"],
                row["state"],
                row["attempts"],
            )
        if report is not None:
            report.dead += len(unanswered)
            report.expired += len(expired)

    def wake(self) -> None:
        """Ask a sleeping ``run`` loop to poll now (a message was just published)."""
        self._wake.set()

    async def run(self, stop: asyncio.Event, *, poll_interval: float) -> DispatchReport:
        """Poll until ``stop`` is set. Graceful: deliveries under way finish; claimed messages
        not started yet are given back at once, their attempt not counted.

        Rounds overlap while the queue has work: after a full batch the next one is claimed
        at once and queues for delivery slots, so the deliveries never wait for a round's
        claim and apply statements (at most ``rounds_in_flight`` rounds at a time)."""
        total = DispatchReport()
        self._stop = stop
        rounds: set[asyncio.Task[DispatchReport]] = set()
        try:
            while not stop.is_set():
                self._wake.clear()  # a publish during this round wakes the next idle at once
                claimed = await self._claim_round(total)
                if claimed:
                    rounds.add(asyncio.create_task(self._deliver_round(claimed)))
                if len(claimed) < self.limits.batch_size:  # nothing more due: poll later
                    await self._idle(stop, poll_interval)
                elif len(rounds) >= self.limits.rounds_in_flight:  # a full batch: more due
                    await asyncio.wait(rounds, return_when=asyncio.FIRST_COMPLETED)
                rounds = _collect_finished(rounds, total)
        finally:
            if rounds:
                await asyncio.wait(rounds)
            _collect_finished(rounds, total)
        return total

    async def _claim_round(self, report: DispatchReport) -> list[ClaimedMessage]:
        now = self._clock()
        try:
            await self.housekeep(now, report)
            return await self.claim(now)
        except Exception:  # a database hiccup must not end the loop
            log.exception("dispatcher round failed; retrying after the poll interval")
            return []

    async def _deliver_round(self, claimed: list[ClaimedMessage]) -> DispatchReport:
        report = DispatchReport()
        try:
            results = await self.push_all(claimed)
            await self.apply(results, now=self._clock(), report=report)
        except Exception:  # unapplied: the messages come back after the visibility timeout
            log.exception("dispatcher round failed; its messages are delivered again later")
        return report

    async def _idle(self, stop: asyncio.Event, seconds: float) -> None:
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter


def _collect_finished(
    rounds: set[asyncio.Task[DispatchReport]], total: DispatchReport
) -> set[asyncio.Task[DispatchReport]]:
    """Add the reports of finished rounds to ``total``; the rounds still under way."""
    for task in [task for task in rounds if task.done()]:
        total.add(task.result())
    return {task for task in rounds if not task.done()}


def _label(result: PushResult) -> str:
    if result.outcome:
        return result.outcome
    return f"http_{result.status}" if result.status is not None else "no_answer"
