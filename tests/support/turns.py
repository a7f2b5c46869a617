"""Concurrent work submitted in chosen turns of the event loop.

Group commit batches everything submitted in one turn of the loop, so a test that needs a
statement of one item (the single-row path) submits that item a turn ahead of the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


async def first_alone_then_together(first: Awaitable[Any], *rest: Awaitable[Any]) -> list[Any]:
    """``first`` submitted and its statement under way, then ``rest`` in one turn: the
    results (an exception in place of its result), in order."""
    head = asyncio.ensure_future(first)
    for _ in range(3):
        await asyncio.sleep(0)
    return await asyncio.gather(head, *rest, return_exceptions=True)


async def one_turn_each(awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
    """Each awaitable submitted in a turn of its own, as requests arriving one by one are;
    the results (an exception in place of its result), in order."""
    tasks = []
    for awaitable in awaitables:
        tasks.append(asyncio.ensure_future(awaitable))
        await asyncio.sleep(0)
    return await asyncio.gather(*tasks, return_exceptions=True)
