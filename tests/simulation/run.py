"""Run simulation seeds on one service instance over one database, emptied between seeds,
or on several processes at once, each with its own SQLite database."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.container import Container, build_container
from app.db.schema import metadata
from tests.conftest import make_settings
from tests.simulation.harness import SimResult, Simulation
from tests.support.clock import FakeClock

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@dataclasses.dataclass
class Bed:
    """The service built once; each seed gets a fresh clock, random source and database."""

    container: Container
    clock: FakeClock
    publisher: MemoryPublisher

    async def run_seed(self, seed: int, *, steps: int = 120) -> SimResult:
        """One seed from an empty database: the same seed gives the same run."""
        await self._empty()
        self.clock.set(START)
        self.publisher.messages.clear()
        self.publisher._recent.clear()  # the dedup window of the previous seed
        base = self.container.receiver
        self.container.receiver = dataclasses.replace(base, rand=random.Random(seed))
        try:
            return await Simulation(self.container, seed, self.clock).run(steps)
        finally:
            self.container.receiver = base

    async def _empty(self) -> None:
        async with self.container.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                await conn.execute(text("PRAGMA defer_foreign_keys = ON"))
            for table in reversed(metadata.sorted_tables):
                await conn.execute(table.delete())


@asynccontextmanager
async def simulation_bed(database_url: str, tmp_path: Path) -> AsyncIterator[Bed]:
    """The service for a series of seeds (its database already migrated)."""
    clock = FakeClock(START)
    publisher = MemoryPublisher(clock=clock)
    settings = make_settings(database_url, tmp_path, database_pool_size=2)
    container = build_container(settings, clock=clock, rand=random.Random(0), publisher=publisher)
    try:
        yield Bed(container, clock, publisher)
    finally:
        await container.aclose()


@dataclasses.dataclass
class Summary:
    """What a series of seeds did, and every seed that broke an invariant."""

    seeds: int = 0
    clean: int = 0
    deliveries: int = 0
    crashes: int = 0
    drops: int = 0
    unknown_outcome_window: int = 0
    queue_gave_up: int = 0
    failures: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add(self, result: SimResult) -> None:
        """Count one seed's run."""
        self.seeds += 1
        self.clean += result.ok
        self.deliveries += result.deliveries
        self.crashes += result.crashes
        self.drops += result.drops
        self.unknown_outcome_window += result.unknown_window
        self.queue_gave_up += result.dead_in_queue
        if not result.ok:
            failure = {"seed": result.seed, "sent_twice": result.sent_twice}
            self.failures.append(failure | {"audit": result.audit.to_json()})

    def merge(self, other: Summary) -> None:
        """Fold another series (another process's) into this one."""
        for counter in dataclasses.fields(self):  # every count adds up; failures concatenate
            name = counter.name
            setattr(self, name, getattr(self, name) + getattr(other, name))


async def run_seeds(database_url: str, workdir: Path, seeds: Iterable[int], steps: int) -> Summary:
    """Run ``seeds`` one after another on one service over one migrated database."""
    summary = Summary()
    async with simulation_bed(database_url, workdir) as bed:
        for seed in seeds:
            summary.add(await bed.run_seed(seed, steps=steps))
    return summary


def _run_slice_on_sqlite(workdir: Path, seeds: list[int], steps: int) -> Summary:
    """One worker process: its own SQLite database, migrated, and its share of the seeds."""
    import uvloop  # what `reminders serve` runs on; a quarter faster here than asyncio's loop

    from app.db.migrations import upgrade_to_head

    workdir.mkdir(parents=True, exist_ok=True)
    url = f"sqlite+aiosqlite:///{workdir}/simulation.db"
    upgrade_to_head(url)
    return uvloop.run(run_seeds(url, workdir, seeds, steps))


def run_seeds_in_processes(workdir: Path, seeds: range, steps: int, workers: int) -> Summary:
    """Spread ``seeds`` over ``workers`` processes, each on its own SQLite file.

    A seed's run depends only on the seed (each starts from an empty database, its own
    clock and random source), so which process runs it changes nothing: a failing seed
    replays alone with ``bench/simulate.py --first SEED --seeds 1``.
    """
    slices = [list(seeds[worker::workers]) for worker in range(workers)]
    summary = Summary()
    # spawn, not fork: the parent may hold an event loop and database threads.
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(_run_slice_on_sqlite, workdir / f"worker-{n}", part, steps)
            for n, part in enumerate(slices)
            if part
        ]
        for future in futures:
            summary.merge(future.result())
    summary.failures.sort(key=lambda failure: failure["seed"])
    return summary


def run_seeds_here(database_url: str, workdir: Path, seeds: range, steps: int) -> Summary:
    """Run ``seeds`` in this process on an already migrated database (e.g. PostgreSQL)."""
    return asyncio.run(run_seeds(database_url, workdir, seeds, steps))
