"""Leases and fencing on a real database: claim, expiry, reclaim, and the late worker's refusal."""

import asyncio
from datetime import timedelta

import pytest

from app.db.ledger import repo as ledger_repo
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.ledger import LedgerKey
from app.domain.messages import SendResult
from app.domain.states import SendState
from tests.support.flow import push_message, put_customer, put_reminder, sweep
from tests.support.rows import dead_letter_rows, send_record_rows

pytestmark = pytest.mark.anyio

KEY = LedgerKey("r1", "email", "scripted")
LEASE = timedelta(seconds=60)


@pytest.fixture
async def message(client, clock, publisher):
    """Reminder r1 due now, swept; its queue message."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    [published] = publisher.drain()
    return published


async def claim(container, clock, key=KEY):
    """A worker's claim through the repository, committed (the worker may then die)."""
    async with container.engine.begin() as conn:
        return await ledger_repo.claim_send(conn, key, now=clock.now, lease_until=clock.now + LEASE)


async def finalize_sent(container, clock, record, request_id="late-worker"):
    """A worker's fenced finalize as sent; True when it still held the claim."""
    async with container.engine.begin() as conn:
        return await ledger_repo.update_claimed_send(
            conn,
            record,
            now=clock.now,
            values={"state": SendState.SENT.value, "provider_request_id": request_id},
        )


async def the_row(container):
    [row] = await send_record_rows(container.engine)
    return row


async def test_claim_creates_the_row_with_a_lease(container, clock, message):
    """The first claim inserts the ledger row: sending, attempt 1, leased for 60 s."""
    record = await claim(container, clock)
    assert record is not None
    assert (record.state, record.attempt_count) == (SendState.SENDING, 1)
    row = await the_row(container)
    assert row["lease_until"] == clock.now + LEASE
    assert row["first_attempt_at"] == clock.now
    assert row["idempotency_key"] == "r1:email:scripted"


async def test_claim_for_an_unknown_reminder_inserts_nothing(container, clock):
    """No reminder, no ledger row (the receiver then quarantines the message)."""
    assert await claim(container, clock, LedgerKey("ghost", "email", "scripted")) is None
    assert await send_record_rows(container.engine) == []


async def test_a_live_lease_cannot_be_claimed_and_an_expired_one_can(container, clock, message):
    """Second claim fails until lease_until; at lease_until it succeeds with attempt 2."""
    await claim(container, clock)
    clock.advance(seconds=59)
    assert await claim(container, clock) is None
    clock.advance(seconds=1)
    again = await claim(container, clock)
    assert again is not None
    assert again.attempt_count == 2
    assert again.lease_until == clock.now + LEASE


async def test_late_finalize_is_refused_and_changes_nothing(container, clock, message):
    """After a reclaim, the first worker's finalize loses the compare-and-set; the row is intact."""
    first = await claim(container, clock)
    clock.advance(seconds=61)
    second = await claim(container, clock)
    before = await the_row(container)
    assert not await finalize_sent(container, clock, first)
    assert await the_row(container) == before
    assert await finalize_sent(container, clock, second, "second-worker")
    row = await the_row(container)
    assert (row["state"], row["provider_request_id"], row["lease_until"]) == (
        "sent",
        "second-worker",
        None,
    )
    assert not await finalize_sent(container, clock, first)
    assert (await the_row(container))["provider_request_id"] == "second-worker"


async def test_final_rows_are_never_claimed_again(container, clock, message):
    """A sent row stays sent: no claim succeeds, however much later."""
    record = await claim(container, clock)
    assert await finalize_sent(container, clock, record)
    for days in (0, 1, 400):
        clock.advance(days=days)
        assert await claim(container, clock) is None
    assert (await the_row(container))["attempt_count"] == 1


async def test_released_claim_is_claimable_without_spending_the_budget(container, clock, message):
    """A stale message gives the claim back: pending again, the attempt not counted."""
    record = await claim(container, clock)
    async with container.engine.begin() as conn:
        assert await ledger_repo.release_claim(conn, record, now=clock.now)
    row = await the_row(container)
    assert (row["state"], row["attempt_count"], row["attempt_budget_start"]) == ("pending", 1, 1)
    again = await claim(container, clock)
    assert again is not None
    assert again.attempts_in_budget == 1


async def test_dead_worker_redelivery_is_busy_then_reclaimed(
    client, container, clock, provider, message
):
    """A worker died after claiming: redeliveries wait out the lease, then one reclaims, sends."""
    dead_worker = await claim(container, clock)
    response = await push_message(client, message)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "60"
    assert (response.json()["outcome"], response.json()["detail"]) == ("busy", "lease held")
    clock.advance(seconds=30)
    response = await push_message(client, message)
    assert (response.status_code, response.headers["Retry-After"]) == (503, "30")
    assert provider.calls == []
    clock.advance(seconds=30)
    response = await push_message(client, message)
    assert response.status_code == 200
    assert (response.json()["outcome"], response.json()["attempt"]) == ("sent", 2)
    row = await the_row(container)
    assert (row["state"], row["attempt_count"], row["provider_request_id"]) == ("sent", 2, "req-1")
    # The dead worker wakes up and tries to finalize: refused, nothing changes.
    assert not await finalize_sent(container, clock, dead_worker)
    assert await the_row(container) == row
    assert len(provider.calls) == 1


async def late_worker_race(client, clock, provider, message, late_result):
    """Worker A is stuck in the provider past its lease; worker B reclaims and sends.

    Returns A's and B's HTTP answers. ``late_result`` is what A's provider call ends with.
    """
    provider.script = [SendResult("from-B"), late_result]
    provider.gate = asyncio.Event()
    worker_a = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    held = provider.gate
    provider.gate = None  # only A's call waits; B's goes straight through
    clock.advance(seconds=61)
    answer_b = await push_message(client, message)
    held.set()
    return await worker_a, answer_b


async def test_late_worker_after_reclaim_gets_busy_and_changes_nothing(
    client, container, clock, provider, message
):
    """A's finalize after B's reclaim and send is refused (lease lost → busy); B's result stands."""
    answer_a, answer_b = await late_worker_race(
        client, clock, provider, message, SendResult("from-A")
    )
    assert (answer_b.status_code, answer_b.json()["outcome"], answer_b.json()["attempt"]) == (
        200,
        "sent",
        2,
    )
    assert answer_a.status_code == 503
    assert answer_a.json()["outcome"] == "busy"
    assert answer_a.json()["detail"] == "lease lost"
    assert int(answer_a.headers["Retry-After"]) >= 1
    row = await the_row(container)
    assert (row["state"], row["attempt_count"], row["provider_request_id"]) == ("sent", 2, "from-B")
    # Both calls carried the same provider idempotency key: the provider deduplicates them.
    assert [c.idempotency_key for c in provider.calls] == ["r1:email:scripted"] * 2
    # The queue's redelivery of A's nack is a duplicate.
    assert (await push_message(client, message)).json()["outcome"] == "duplicate"


@pytest.mark.parametrize(
    "late_failure",
    [TransientProviderError("late timeout"), PermanentProviderError("late rejection")],
    ids=["transient", "permanent"],
)
async def test_late_worker_failure_does_not_undo_a_send(
    client, container, clock, provider, message, late_failure
):
    """A late worker's failure cannot turn B's sent row into a retry, terminal or dead letter."""
    answer_a, _ = await late_worker_race(client, clock, provider, message, late_failure)
    assert (answer_a.status_code, answer_a.json()["outcome"]) == (503, "busy")
    row = await the_row(container)
    assert (row["state"], row["provider_request_id"], row["last_error"]) == ("sent", "from-B", None)
    assert row["next_attempt_at"] is None
    assert await dead_letter_rows(container.engine) == []


async def test_late_worker_finalizing_during_the_new_workers_send_is_refused(
    client, container, clock, provider, message
):
    """A's finalize while B (attempt 2) is still sending loses on the attempt fence."""
    provider.script = [SendResult("from-A"), SendResult("from-B")]
    gate_a = provider.gate = asyncio.Event()
    worker_a = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    clock.advance(seconds=61)
    gate_b = provider.gate = asyncio.Event()
    provider.entered.clear()
    worker_b = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    gate_a.set()
    answer_a = await worker_a
    assert (answer_a.status_code, answer_a.json()["outcome"]) == (503, "busy")
    assert answer_a.json()["detail"] == "lease lost"
    row = await the_row(container)
    assert (row["state"], row["attempt_count"], row["provider_request_id"]) == ("sending", 2, None)
    assert row["lease_until"] == clock.now + LEASE
    gate_b.set()
    assert (await worker_b).json()["outcome"] == "sent"
    row = await the_row(container)
    assert (row["state"], row["provider_request_id"]) == ("sent", "from-B")
