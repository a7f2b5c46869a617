"""The in-process sweep timer reports like the cron route does."""

import asyncio
from datetime import UTC, datetime

from app.observability.metrics import SWEEP_ENQUEUED
from app.services.background import sweep_periodically
from app.services.sweep import SweepReport


async def test_periodic_sweep_feeds_the_sweep_metrics():
    """Each timer sweep adds its enqueued rows to the same counter /cron/sweep feeds."""
    stop = asyncio.Event()
    before = SWEEP_ENQUEUED._value.get()

    async def run_sweep() -> SweepReport:
        stop.set()  # one tick is enough
        return SweepReport(7, 9, 0, datetime(2026, 8, 17, tzinfo=UTC), 12)

    await sweep_periodically(run_sweep, every=3600, stop=stop)
    assert SWEEP_ENQUEUED._value.get() - before == 7
