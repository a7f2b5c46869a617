"""The ledger gauges and audit figures of ``/metrics``: one reading for the whole database.

A scrape never touches the database: it reads the last snapshot from memory. Each process
runs one background task that, every ``REMINDERS_METRICS_INTERVAL_SECONDS``, looks at the
shared reading (one row, ``db/ledger_readings_repo.py``): when the next reading is due, the
first process to take the row's lease reads the ledger (bounded by the interval) and
publishes what it found; every other process adopts that snapshot. A reading costs seconds
of database work on a large ledger (the audit walks every send of its 8-day window), and
before, every worker of every replica paid it.

20 concurrent scrapes used to run 20 audits on the small pool the API, the sweep and
``/readyz`` share, and ``/readyz`` answered 503; that is why scrapes read memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import ledger_readings_repo
from app.db.ledger_readings_repo import StoredReading

from .audit import run_audit
from .deliverability import deliverability_figures
from .ledger_snapshot import LedgerSnapshot
from .operations import ledger_figures

log = logging.getLogger("reminders.metrics")

# The share of the time readings may take at most. On a large ledger a reading costs
# seconds of database work (~8 s at a million sends), so a slow reading spaces out the next
# for every process (the row's ``next_at``; the snapshot's age shows it).
READING_SHARE = 0.05

# A process with no snapshot yet looks again this soon while another takes the first reading.
FIRST_READING_POLL_SECONDS = 1.0


class LedgerMetrics:
    """Holds the latest snapshot; ``turn`` reads the ledger or adopts the shared reading,
    ``run`` turns forever; ``refresh`` reads the ledger now, in this process."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Callable[[], datetime],
        interval_seconds: float,
        timeout_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.interval_seconds = interval_seconds
        self.timeout_seconds = timeout_seconds
        self.monotonic = monotonic
        self.reader = secrets.token_hex(8)  # this process, as the lease holder
        self.snapshot = LedgerSnapshot()

    async def refresh(self) -> LedgerSnapshot:
        """Read the gauges and run the audit now (bounded); a failure is ``figures`` None."""
        figures, audit, deliverability = None, None, None
        try:
            async with asyncio.timeout(self.timeout_seconds), self.engine.connect() as conn:
                figures = await ledger_figures(conn, now=self.clock())
                audit = await run_audit(conn, now=self.clock())
                deliverability = await deliverability_figures(conn, now=self.clock())
        except Exception as error:  # scrapes still answer; reminders_ledger_up 0 says why
            log.warning("ledger gauges unavailable: %s", type(error).__name__)
        self.snapshot = LedgerSnapshot(figures, audit, deliverability, self.clock())
        return self.snapshot

    def age_seconds(self) -> float | None:
        """Seconds since the snapshot's reading ended, None before the first."""
        taken = self.snapshot.taken_at
        return None if taken is None else max(0.0, (self.clock() - taken).total_seconds())

    def pause_after(self, spent: float) -> float:
        """How long to wait after a reading that took ``spent`` seconds: the interval, or
        longer, so that readings take at most ``READING_SHARE`` of the time."""
        return max(self.interval_seconds, spent / READING_SHARE - spent)

    async def turn(self) -> float:
        """Take the due reading, or adopt the last one published; the seconds to the next
        turn. The shared row unreadable (the database down): ``figures`` None."""
        now = self.clock()
        try:
            async with asyncio.timeout(self.timeout_seconds), self.engine.begin() as conn:
                mine = await ledger_readings_repo.claim(
                    conn, reader=self.reader, now=now, lease_until=self._lease_end(now)
                )
                stored = None if mine else await ledger_readings_repo.last_reading(conn)
        except Exception as error:
            log.warning("ledger gauges unavailable: %s", type(error).__name__)
            self.snapshot = LedgerSnapshot(taken_at=now)
            return self.interval_seconds
        if mine:
            await self._read_and_publish()
        elif stored is not None:
            self._adopt(stored)
        if self.snapshot.taken_at is None:  # another process takes the first reading
            return min(self.interval_seconds, FIRST_READING_POLL_SECONDS)
        return self.interval_seconds

    def _lease_end(self, now: datetime) -> datetime:
        # The reading is bounded by the timeout, and so is its publishing: past both, the
        # reader died or froze, and another process may read.
        return now + timedelta(seconds=2 * self.timeout_seconds)

    async def _read_and_publish(self) -> None:
        started = self.monotonic()
        snapshot = await self.refresh()
        spent = self.monotonic() - started
        pause = self.pause_after(spent)
        if pause > self.interval_seconds:
            log.info(
                "ledger reading took %.1f s: the next in %.0f s, not %g s "
                "(readings take at most %.0f%% of the time)",
                spent, pause, self.interval_seconds, READING_SHARE * 100,
            )  # fmt: skip
        assert snapshot.taken_at is not None
        try:
            async with asyncio.timeout(self.timeout_seconds), self.engine.begin() as conn:
                await ledger_readings_repo.publish(
                    conn,
                    reader=self.reader,
                    taken_at=snapshot.taken_at,
                    next_at=snapshot.taken_at + timedelta(seconds=pause),
                    snapshot=snapshot.to_stored(),
                )
        except Exception as error:  # this process keeps it; the lease lapses for another
            log.warning("ledger reading not shared: %s", type(error).__name__)

    def _adopt(self, stored: StoredReading) -> None:
        # A newer reading than ours, or any reading when ours failed (the database is back).
        ours = self.snapshot
        if ours.figures is None or ours.taken_at is None or stored.taken_at > ours.taken_at:
            self.snapshot = LedgerSnapshot.from_stored(stored.snapshot, taken_at=stored.taken_at)

    async def run(self, stop: asyncio.Event) -> None:
        """Turn at once, then every interval, until ``stop`` is set."""
        while not stop.is_set():
            pause = await self.turn()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)

    def start(self) -> Callable[[], Awaitable[None]]:
        """Run the turns in the background; returns the coroutine function stopping them (a
        reading in progress is cancelled: it only reads, and its lease lapses)."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop), name="ledger-metrics")

        async def halt() -> None:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        return halt
