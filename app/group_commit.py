"""Group commit: the same work of many concurrent callers, done as one batch.

The ledger's statements and the suppression lookups batch their rows into one database
statement; the outbox batches its fsync'd file writes into one thread hand-off.

A claim or a finalize costs the database a statement, a transaction and a WAL flush, and
the process a pool checkout and a round trip; under load those costs dominate the push
path. Here a caller hands its item over and waits for its own result. While fewer than
``max_in_flight`` statements run, an item goes out at once, in the loop's next turn,
with every item submitted in the same turn (no added latency when the process is quiet);
otherwise it waits for the next statement, which takes every item that queued meanwhile
(up to ``max_batch``). Each statement commits on its own (autocommit), so
a caller's answer always follows the commit of its own row.

Two items with the same key never share a statement: the second waits for the next one,
so it sees the first one's effect exactly as two separate statements would (PostgreSQL
also refuses one ``INSERT ... ON CONFLICT DO UPDATE`` that touches a row twice). Reads
have nothing to keep apart: with ``key=None`` equal items share a statement.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

# Results of one statement: one per item, in order; an exception stands for that item alone.
BatchRunner = Callable[[Sequence[In]], Awaitable[Sequence[Out | BaseException]]]


class GroupCommit(Generic[In, Out]):
    """Concurrent callers' items, run together by ``run_batch``."""

    def __init__(
        self,
        run_batch: BatchRunner[In, Out],
        *,
        key: Callable[[In], Hashable] | None,
        max_batch: int = 128,
        max_in_flight: int = 2,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("max_batch and max_in_flight must be at least 1")
        self._run_batch = run_batch
        self._key = key
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._waiting: deque[tuple[In, asyncio.Future[Out]]] = deque()
        self._in_flight: set[asyncio.Task[None]] = set()
        self._opening: asyncio.Task[None] | None = None  # started, its items not yet taken
        self.statements = 0  # how many statements ran (tests and benchmarks read it)

    async def submit(self, item: In) -> Out:
        """Run ``item`` with whatever else is waiting; its result, or its exception."""
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        self._start_batches()
        # A cancelled caller leaves its item to the statement it is in (that statement
        # commits or not as a whole); an item not yet taken is skipped.
        return await future

    def _start_batches(self) -> None:
        # A statement takes its items when its task first runs, not when it is created:
        # the task runs in the loop's next turn either way, and by then every caller of
        # this turn has queued (a batch of sends ending together finalizes in one
        # statement; taken at creation, the first two went out alone). One task at a time
        # waits to take its items; it starts the next if items are left over.
        if self._waiting and self._opening is None and len(self._in_flight) < self._max_in_flight:
            task = asyncio.get_running_loop().create_task(self._run())
            self._opening = task
            self._in_flight.add(task)
            task.add_done_callback(self._finished)

    def _take_batch(self) -> list[tuple[In, asyncio.Future[Out]]]:
        batch: list[tuple[In, asyncio.Future[Out]]] = []
        keys: set[Hashable] = set()
        deferred: list[tuple[In, asyncio.Future[Out]]] = []
        while self._waiting and len(batch) < self._max_batch:
            item, future = self._waiting.popleft()
            if future.done():  # its caller was cancelled before the item was taken
                continue
            key = None if self._key is None else self._key(item)
            if key is not None:
                if key in keys:
                    deferred.append((item, future))
                    continue
                keys.add(key)
            batch.append((item, future))
        self._waiting.extendleft(reversed(deferred))  # first in line for the next statement
        return batch

    async def _run(self) -> None:
        self._opening = None
        batch = self._take_batch()
        self._start_batches()  # items left over (a full batch, a repeated key): the next one
        if not batch:
            return
        self.statements += 1
        try:
            results = await self._run_batch([item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as error:  # every caller of the statement hears of it
            results = [error] * len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        if self._opening is task:  # cancelled before it took its items
            self._opening = None
        if not task.cancelled():
            task.exception()  # _run delivers every error to its callers; mark it seen
        self._start_batches()

    async def drain(self) -> None:
        """Wait until every statement started so far has finished (closing, tests)."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
