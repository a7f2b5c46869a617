"""The deterministic simulation over many seeds: after each, the audit passes and no key
was accepted twice outside the provider's unknown-outcome window."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.simulation.run import Bed, simulation_bed

# SQLite runs the seeds of CI; PostgreSQL (several times slower per seed here) a few, to
# keep the same pipeline honest on the other database. bench/simulate.py runs thousands.
SEEDS = {"sqlite": 50, "postgresql": 5}
SEEDS_OVERRIDE = os.environ.get("REMINDERS_SIMULATION_SEEDS")
STEPS = int(os.environ.get("REMINDERS_SIMULATION_STEPS", "60"))

pytestmark = pytest.mark.anyio


@pytest.fixture
async def bed(clean_database_url: str, tmp_path: Path) -> AsyncIterator[Bed]:
    """The service, built once for every seed of a test."""
    async with simulation_bed(clean_database_url, tmp_path) as built:
        yield built


async def test_every_seed_keeps_the_invariants(bed: Bed, db_backend: str):
    """Seeded runs of the whole pipeline under chaos; a failure names its seed."""
    failed = []
    for seed in range(int(SEEDS_OVERRIDE or SEEDS[db_backend])):
        result = await bed.run_seed(seed, steps=STEPS)
        if not result.ok:
            failed.append((seed, result.sent_twice, result.audit.to_json()))
    assert failed == []


async def test_a_seed_replays_exactly(bed: Bed):
    """The same seed twice: the same deliveries, crashes, drops and outcome."""
    first = await bed.run_seed(7)
    again = await bed.run_seed(7)
    summary = lambda r: (r.deliveries, r.crashes, r.drops, r.unknown_window, r.sent_twice)  # noqa: E731
    assert summary(first) == summary(again)
    assert first.deliveries > 50 and first.crashes > 0 and first.drops > 0
