"""Measure how long the event loop is kept from turning, in CPU time of its thread.

A heartbeat task wakes every millisecond and records the CPU time (``time.thread_time``)
this thread spent since its previous wake-up: everything other callbacks ran in between.
CPU time, not wall time, so a busy shared machine does not make the figure flaky; work
done in other threads (aiosqlite's) is not the loop's and is not counted. The garbage of
earlier tests is collected and frozen first: a full collection over a whole test session's
heap (300 ms, seen) is the test process's cost, not the code under measurement's.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class LoopBlocking:
    """The longest stretch of loop-thread CPU between two heartbeats, in seconds."""

    longest: float = 0.0


@asynccontextmanager
async def loop_blocking() -> AsyncIterator[LoopBlocking]:
    """Run a heartbeat for the duration of the block; read ``.longest`` afterwards."""
    measured = LoopBlocking()
    stopped = asyncio.Event()

    async def heartbeat() -> None:
        last = time.thread_time()
        while not stopped.is_set():
            await asyncio.sleep(0.001)
            now = time.thread_time()
            measured.longest = max(measured.longest, now - last)
            last = now

    gc.collect()
    gc.freeze()
    task = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)  # let the heartbeat take its first reading
    try:
        yield measured
    finally:
        stopped.set()
        await task
        gc.unfreeze()
