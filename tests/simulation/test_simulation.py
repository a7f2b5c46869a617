"""The deterministic simulation over many seeds: after each, the audit passes and no key
was accepted twice outside the provider's unknown-outcome window."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.simulation.run import Bed, run_seeds_in_processes, simulation_bed

# SQLite runs the seeds of CI, spread over one process per core (each on its own database
# file); PostgreSQL (several times slower per seed here) a few in this process, to keep the
# same pipeline honest on the other database. bench/simulate.py runs thousands.
SEEDS = {"sqlite": 300, "postgresql": 5}
SEEDS_OVERRIDE = os.environ.get("REMINDERS_SIMULATION_SEEDS")
STEPS = int(os.environ.get("REMINDERS_SIMULATION_STEPS", "60"))


def seed_count(db_backend: str) -> int:
    """How many seeds this run takes (REMINDERS_SIMULATION_SEEDS overrides)."""
    return int(SEEDS_OVERRIDE or SEEDS[db_backend])


@pytest.fixture
async def bed(clean_database_url: str, tmp_path: Path) -> AsyncIterator[Bed]:
    """The service, built once for every seed of a test."""
    async with simulation_bed(clean_database_url, tmp_path) as built:
        yield built


@pytest.mark.timeout(900)  # a minute on two idle cores; a loaded machine takes longer
def test_every_seed_keeps_the_invariants_on_sqlite(db_backend: str, tmp_path: Path):
    """Hundreds of seeded runs under chaos, on every core; a failure names its seed. The
    chaos really happened: crashes, dropped connections and a queue that gave up."""
    if db_backend != "sqlite":
        pytest.skip("the many-seed run uses SQLite files of its own")
    workers = min(os.cpu_count() or 1, 4)
    summary = run_seeds_in_processes(tmp_path, range(seed_count("sqlite")), STEPS, workers)
    assert summary.failures == []
    assert summary.clean == summary.seeds == seed_count("sqlite")
    if summary.seeds >= 50:  # enough seeds for every kind of trouble to have happened
        assert summary.crashes and summary.drops and summary.queue_gave_up


@pytest.mark.anyio
@pytest.mark.timeout(600)
async def test_every_seed_keeps_the_invariants_on_postgresql(bed: Bed, db_backend: str):
    """A few seeded runs on PostgreSQL, one after another in this process."""
    if db_backend != "postgresql":
        pytest.skip("SQLite runs its seeds in the test above")
    failed = []
    for seed in range(seed_count("postgresql")):
        result = await bed.run_seed(seed, steps=STEPS)
        if not result.ok:
            failed.append((seed, result.sent_twice, result.audit.to_json()))
    assert failed == []


@pytest.mark.anyio
async def test_a_seed_replays_exactly(bed: Bed):
    """The same seed twice: the same deliveries, crashes, drops, give-ups and outcome."""
    first = await bed.run_seed(7)
    again = await bed.run_seed(7)
    summary = lambda r: (  # noqa: E731
        r.deliveries,
        r.crashes,
        r.drops,
        r.unknown_window,
        r.sent_twice,
        r.dead_in_queue,
    )
    assert summary(first) == summary(again)
    # A run with real work and real chaos. Seed 7 makes exactly 50 deliveries since a claim
    # writes its attempt itself: one ledger await fewer per delivery, so fewer chaos rolls.
    assert first.deliveries >= 50 and first.crashes > 0 and first.drops > 0
