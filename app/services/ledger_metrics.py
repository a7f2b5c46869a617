"""The ledger gauges and audit figures of ``/metrics``, computed by one background task.

A scrape never touches the database: it reads the last snapshot from memory. One task per
process recomputes it every ``REMINDERS_METRICS_INTERVAL_SECONDS`` (bounded by
``REMINDERS_READYZ_TIMEOUT_SECONDS``), so the cost of the audit's reads no longer grows with
the number of scrapers: 20 concurrent scrapes used to run 20 audits on the small pool the
API, the sweep and ``/readyz`` share, and ``/readyz`` answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from .audit import AuditReport, run_audit
from .deliverability import DeliverabilityFigures, deliverability_figures
from .operations import LedgerFigures, ledger_figures

log = logging.getLogger("reminders.metrics")

# The share of a process's time its readings may take at most. On a large ledger a reading
# costs seconds of database work (the audit's checks walk every send of its 8-day window:
# ~8 s at a million sends), and every worker of every replica reads: at 30 s apart, two
# workers kept half a core of PostgreSQL busy with readings during a million-reminder run.
# So a slow reading spaces out the next (the snapshot's age shows it).
READING_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """One reading of the ledger; ``figures`` None when the last reading failed."""

    figures: LedgerFigures | None = None
    audit: AuditReport | None = None
    deliverability: DeliverabilityFigures | None = None
    taken_at: float | None = None  # time.monotonic() of the reading; None: never read


class LedgerMetrics:
    """Holds the latest snapshot; ``refresh`` reads the ledger, ``run`` refreshes forever."""

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
        self.snapshot = LedgerSnapshot(figures, audit, deliverability, self.monotonic())
        return self.snapshot

    def age_seconds(self) -> float | None:
        """Seconds since the last reading, None before the first."""
        taken = self.snapshot.taken_at
        return None if taken is None else self.monotonic() - taken

    def pause_after(self, spent: float) -> float:
        """How long to wait after a reading that took ``spent`` seconds: the interval, or
        longer, so that readings take at most ``READING_SHARE`` of the time."""
        return max(self.interval_seconds, spent / READING_SHARE - spent)

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh at once, then every interval (or ``pause_after``), until ``stop`` is set."""
        while not stop.is_set():
            started = self.monotonic()
            await self.refresh()
            spent = self.monotonic() - started
            pause = self.pause_after(spent)
            if pause > self.interval_seconds:
                log.info(
                    "ledger reading took %.1f s: the next in %.0f s, not %g s "
                    "(readings take at most %.0f%% of the time)",
                    spent, pause, self.interval_seconds, READING_SHARE * 100,
                )  # fmt: skip
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)

    def start(self) -> Callable[[], Awaitable[None]]:
        """Run the refresh task in the background; returns the coroutine function stopping it
        (a reading in progress is cancelled: it only reads)."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop), name="ledger-metrics")

        async def halt() -> None:
            stop.set()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        return halt
