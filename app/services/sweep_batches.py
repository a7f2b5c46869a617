"""The sweep's batches, a few in flight at once: each batch is the caller's (claim,
publish, mark, on rows of its own); this runs them until the work or the budget ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.domain.errors import PublishError

log = logging.getLogger("reminders.sweep")


@dataclass(frozen=True, slots=True)
class Swept:
    """What one batch published."""

    reminders: int
    messages: int


@dataclass(slots=True)
class Published:
    """What the batches published together, and why they stopped."""

    enqueued: int = 0
    messages: int = 0
    error: str | None = None  # the queue refused a batch
    finished: bool = False


async def publish_due(
    one_batch: Callable[[], Awaitable[Swept]],
    *,
    workers: int,
    batch_size: int,
    out_of_time: Callable[[], bool],
) -> Published:
    """Run batches, ``workers`` at a time, until one comes back short (nothing due is left
    unclaimed), the queue refuses one, or the budget is spent. A batch in flight when
    another finishes the work completes: its rows are its own until it commits."""
    published = Published()

    async def work() -> None:
        while not published.finished and not out_of_time():
            try:
                swept = await one_batch()
            except PublishError as failure:
                if published.error is None:
                    published.error = str(failure)
                    log.error("sweep stopped: the queue refused a batch: %s", failure)
                published.finished = True
                return
            published.enqueued += swept.reminders
            published.messages += swept.messages
            if swept.reminders < batch_size:
                published.finished = True

    # Any other failure (the database) cancels the other batches and reaches the caller as
    # it is; a cancelled batch rolls back and its rows stay due.
    tasks = [asyncio.ensure_future(work()) for _ in range(workers)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for failure in (task.exception() for task in done):
        if failure is not None:
            raise failure
    return published
