"""Run simulation seeds on one service instance over one database, emptied between seeds."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from app.adapters.queues.memory import MemoryPublisher
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
