"""Group commit: concurrent callers' items share statements, each caller gets its own result.

A scripted ``run_batch`` stands in for the database: it records every statement's items
and waits on a gate the test opens, so what shares a statement is decided by the test,
not by timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.group_commit import GroupCommit


class Statements:
    """A fake statement runner: records batches, answers each item with ``item * 10``."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_items: set[int] = set()
        self.raise_all: Exception | None = None

    async def run(self, items: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.raise_all is not None:
            raise self.raise_all
        return [ValueError(f"bad {i}") if i in self.fail_items else i * 10 for i in items]


def group(statements: Statements, **options: int) -> GroupCommit[int, int]:
    return GroupCommit(statements.run, key=lambda item: item % 100, **options)


async def started(first, *later) -> list[asyncio.Task]:
    """``first`` submitted and its statement started, then the ``later`` ones submitted
    together (in one turn of the loop) while it runs."""
    tasks = [asyncio.ensure_future(first)]
    await turns()
    tasks += [asyncio.ensure_future(c) for c in later]
    await turns()  # every later task submits its item; a second statement may start
    return tasks


async def turns(count: int = 3) -> None:
    """Let the event loop run a few rounds (no time passes)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_quiet_caller_goes_out_at_once_alone():
    statements = Statements()
    assert await group(statements).submit(7) == 70
    assert statements.batches == [[7]]


async def test_items_submitted_in_one_turn_share_the_first_statement():
    """A batch of sends ending together submits its finalizes in one turn of the loop:
    they go out as one statement (before, the first two went out alone, one each)."""
    statements = Statements()
    commit = group(statements, max_in_flight=2)
    results = await asyncio.gather(*(commit.submit(i) for i in range(1, 6)))
    assert results == [10, 20, 30, 40, 50]
    assert statements.batches == [[1, 2, 3, 4, 5]]


async def test_a_full_batch_leaves_the_rest_to_a_second_statement_at_once():
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=2, max_batch=3)
    tasks = [asyncio.ensure_future(commit.submit(i)) for i in range(1, 8)]
    await turns()
    assert statements.batches == [[1, 2, 3], [4, 5, 6]]  # two in flight; 7 waits
    statements.gate.set()
    assert await asyncio.gather(*tasks) == [i * 10 for i in range(1, 8)]
    assert statements.batches == [[1, 2, 3], [4, 5, 6], [7]]


async def test_items_that_queue_behind_a_running_statement_share_the_next_one():
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=1)
    tasks = await started(*(commit.submit(i) for i in range(1, 6)))
    assert statements.batches == [[1]]  # the first went out alone; the others wait
    statements.gate.set()
    assert await asyncio.gather(*tasks) == [10, 20, 30, 40, 50]
    assert statements.batches == [[1], [2, 3, 4, 5]]
    assert commit.statements == 2


async def test_statements_in_flight_and_batch_size_are_bounded():
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=2, max_batch=3)
    tasks = await started(*(commit.submit(i) for i in range(1, 10)))
    assert statements.batches == [[1], [2, 3, 4]]  # two in flight, three items at most
    statements.gate.set()
    assert await asyncio.gather(*tasks) == [i * 10 for i in range(1, 10)]
    assert all(len(batch) <= 3 for batch in statements.batches)
    assert sorted(i for batch in statements.batches for i in batch) == list(range(1, 10))


async def test_two_items_with_one_key_never_share_a_statement():
    """101 and 1 have the same key (i % 100): the second waits for the next statement and
    keeps its place at the head of the line."""
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=1)
    tasks = await started(commit.submit(5), commit.submit(1), commit.submit(101), commit.submit(2))
    statements.gate.set()
    assert await asyncio.gather(*tasks) == [50, 10, 1010, 20]
    assert statements.batches == [[5], [1, 2], [101]]


async def test_an_item_that_fails_fails_only_its_own_caller():
    statements = Statements()
    statements.gate.clear()
    statements.fail_items = {3}
    commit = group(statements, max_in_flight=1)
    tasks = await started(*(commit.submit(i) for i in (1, 2, 3, 4)))
    statements.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert results[:2] == [10, 20] and results[3] == 40
    assert isinstance(results[2], ValueError) and str(results[2]) == "bad 3"


async def test_a_statement_that_fails_reaches_every_caller_in_it():
    statements = Statements()
    statements.raise_all = ConnectionError("database gone")
    commit = group(statements)
    results = await asyncio.gather(commit.submit(1), commit.submit(2), return_exceptions=True)
    assert all(isinstance(r, ConnectionError) for r in results)
    statements.raise_all = None
    assert await commit.submit(3) == 30  # the group goes on


async def test_a_caller_cancelled_before_its_statement_is_left_out_of_it():
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=1)
    first, gone, last = await started(commit.submit(1), commit.submit(2), commit.submit(3))
    gone.cancel()
    statements.gate.set()
    assert await first == 10 and await last == 30
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert statements.batches == [[1], [3]]


async def test_a_caller_cancelled_during_its_statement_leaves_it_running_for_the_others():
    statements = Statements()
    statements.gate.clear()
    commit = group(statements, max_in_flight=1)
    first, second = await started(commit.submit(1), commit.submit(2))
    first.cancel()  # the statement with item 1 is already running: it is not stopped
    statements.gate.set()
    assert await second == 20
    await commit.drain()
    assert statements.batches == [[1], [2]]


def test_bounds_must_be_positive():
    with pytest.raises(ValueError):
        GroupCommit(Statements().run, key=lambda i: i, max_batch=0)
