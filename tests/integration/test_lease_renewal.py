"""A live worker does not outlive its lease: a slow send renews it, and a stalled one that
outlived it says so (metric and log) and has its finalize refused.

Time is the injected clock; the renewal's waits are the test's ``Ticks``, released one at
a time, so no test sleeps for a lease.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.db.tables import send_attempts
from app.domain.messages import SendResult
from tests.integration.test_leases import message
from tests.support.flow import push_message
from tests.support.rows import send_record_rows

pytestmark = pytest.mark.anyio
__all__ = ["message"]  # r1 swept, its queue message (the lease tests' fixture)


class Ticks:
    """An injectable ``sleep`` whose waits end only when the test says so."""

    def __init__(self) -> None:
        self.sleeping: asyncio.Queue[asyncio.Future[None]] = asyncio.Queue()
        self.current: asyncio.Future[None] | None = None

    async def sleep(self, _seconds: float) -> None:
        """Wait for the test's next ``tick``."""
        wake = asyncio.get_running_loop().create_future()
        await self.sleeping.put(wake)
        await wake

    async def tick(self) -> None:
        """End the current wait (the first one, once it begins)."""
        wake = self.current or await self.sleeping.get()
        self.current = None
        wake.set_result(None)

    async def tick_and_wait(self) -> None:
        """``tick``, then return once the sleeper waits again (its work in between done)."""
        await self.tick()
        self.current = await self.sleeping.get()


@pytest.fixture
async def ticks(container) -> Ticks:
    """The lease keeper's waits between renewals, driven by the test."""
    driven = Ticks()
    container.receiver = dataclasses.replace(container.receiver, renewal_sleep=driven.sleep)
    return driven


def outlived(reason: str) -> float:
    """The counter of sends that outlived their lease, for one reason."""
    return REGISTRY.get_sample_value("reminders_leases_outlived_total", {"reason": reason}) or 0.0


async def test_a_send_slower_than_its_lease_keeps_the_row(
    client, container, clock, provider, message, ticks
):
    """The provider blocks 80 s with a 60 s lease: renewals at 40 s and 80 s keep the lease,
    a redelivery at 80 s is answered busy, and the provider is called once."""
    provider.gate = asyncio.Event()
    worker = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    for _ in range(2):
        clock.advance(seconds=40)
        await ticks.tick_and_wait()  # the renewal's statement ran
    [row] = await send_record_rows(container.engine)
    assert row["lease_until"] == clock.now + container.receiver.policy.lease
    redelivery = await push_message(client, message)
    assert (redelivery.status_code, redelivery.json()["outcome"]) == (503, "busy")
    provider.gate.set()
    answer = await worker
    assert (answer.json()["outcome"], answer.json()["attempt"]) == ("sent", 1)
    assert len(provider.calls) == 1


class FinalizeWaits:
    """The receiver's ledger, whose sent-finalize waits until the test opens ``gate`` (as
    one waits for a pool connection, its group's turn or a row lock under load)."""

    def __init__(self, ledger) -> None:
        self._ledger = ledger
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    def __getattr__(self, name: str):
        return getattr(self._ledger, name)

    async def finalize_send(self, *args, **kwargs) -> None:
        self.entered.set()
        await self.gate.wait()
        await self._ledger.finalize_send(*args, **kwargs)


async def test_a_finalize_that_waits_past_the_lease_keeps_the_row(
    client, container, clock, provider, message, ticks
):
    """The provider accepts at once; the finalize then waits 80 s with a 60 s lease. The
    renewals go on while it waits, so a redelivery at 80 s is answered busy: had they
    stopped with the call, it would have reclaimed the row and sent the email again."""
    ledger = FinalizeWaits(container.receiver.ledger)
    container.receiver = dataclasses.replace(container.receiver, ledger=ledger)
    worker = asyncio.create_task(push_message(client, message))
    try:
        await ledger.entered.wait()
        for _ in range(2):
            clock.advance(seconds=40)
            # The renewal's statement ran (no renewer left: the wait fails the test).
            await asyncio.wait_for(ticks.tick_and_wait(), timeout=5)
        redelivery = await push_message(client, message)
    finally:
        ledger.gate.set()
    answer = await worker
    assert (redelivery.status_code, redelivery.json()["outcome"]) == (503, "busy")
    assert (answer.json()["outcome"], answer.json()["attempt"]) == ("sent", 1)
    assert len(provider.calls) == 1


async def test_a_stalled_send_that_outlived_its_lease_says_so_and_is_fenced_off(
    client, container, clock, provider, message, ticks, log_lines
):
    """No renewal ran before the lease ended (a stalled process): another worker reclaims
    and sends; the stalled worker's renewal is refused, counted and logged, and its
    finalize is refused (busy), leaving the other worker's result."""
    provider.script = [SendResult("from-B"), SendResult("from-A")]
    provider.gate = asyncio.Event()
    worker_a = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    held, provider.gate = provider.gate, None
    clock.advance(seconds=61)
    answer_b = await push_message(client, message)
    assert (answer_b.json()["outcome"], answer_b.json()["attempt"]) == ("sent", 2)
    before = outlived("renewal_refused")
    await ticks.tick()
    # The refused renewal ends without waiting again: poll for its counter.
    while outlived("renewal_refused") == before:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    held.set()
    answer_a = await worker_a
    assert outlived("renewal_refused") == before + 1
    [line] = [line for line in log_lines() if line["event"] == "lease_outlived"]
    assert (line["level"], line["ledger_key"]) == ("error", "r1:email:scripted")
    assert line["error_class"] == "renewal_refused"
    assert (answer_a.status_code, answer_a.json()["outcome"]) == (503, "busy")
    [row] = await send_record_rows(container.engine)
    assert (row["state"], row["provider_request_id"]) == ("sent", "from-B")


async def test_a_refused_renewal_cuts_the_call_in_flight_short_as_unknown_outcome(
    client, container, clock, provider, message, ticks
):
    """A's provider never answers. Once another worker has taken the row over, A's next
    renewal is refused: A's call is cancelled then and there (not awaited to its end), and
    its attempt is recorded ``unknown_outcome`` with the provider called (the request had
    left), beside B's ``sent``."""
    provider.script = [SendResult("from-B")]
    provider.gate = asyncio.Event()  # never set: A's call hangs
    worker_a = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    provider.gate = None
    clock.advance(seconds=61)
    answer_b = await push_message(client, message)
    assert (answer_b.json()["outcome"], answer_b.json()["attempt"]) == ("sent", 2)
    await ticks.tick()
    answer_a = await asyncio.wait_for(worker_a, timeout=10)
    assert (answer_a.status_code, answer_a.json()["outcome"]) == (503, "busy")
    async with container.engine.connect() as conn:
        rows = await conn.execute(
            select(
                send_attempts.c.attempt, send_attempts.c.outcome, send_attempts.c.provider_called
            ).order_by(send_attempts.c.attempt)
        )
        assert [tuple(row) for row in rows] == [(1, "unknown_outcome", True), (2, "sent", True)]
