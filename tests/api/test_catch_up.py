"""A queue that drops a message never loses the reminder: the sweep catches up by state.

Default margin 30 minutes (``CatchUpLimits``). The in-memory queue stands for any queue
here: a test drops what it holds to play a queue that gave up.
"""

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from app.db.ledger import repo as ledger_repo
from app.domain.errors import TransientProviderError
from app.domain.ledger import LedgerKey
from app.services.audit import run_audit
from tests.support.flow import API, deliver_all, push_message, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


async def start(client, clock, publisher, channels=("email",)):
    """A due reminder swept once; the queue now holds its message(s)."""
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now, channels=channels)
    report = await sweep(client)
    assert report["enqueued"] == 1 and report["republished"] == 0
    return publisher.drain()


async def test_a_message_dropped_before_any_delivery_is_republished_and_sent_once(
    client, clock, publisher, provider
):
    """No send record at all: after the margin the sweep republishes under a new key."""
    [dropped] = await start(client, clock, publisher)
    clock.advance(minutes=29)
    assert (await sweep(client))["republished"] == 0  # within the margin: maybe just late
    clock.advance(minutes=2)
    assert (await sweep(client))["republished"] == 1
    [again] = publisher.messages
    assert again.idempotency_key != dropped.idempotency_key
    assert again.idempotency_key.startswith("r1:email:v1:catchup:")
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["sent"]
    # The lost message was only late after all: the ledger absorbs it.
    assert (await push_message(client, dropped)).json()["outcome"] == "duplicate"
    clock.advance(hours=2)
    assert (await sweep(client))["republished"] == 0
    assert len(provider.calls) == 1


async def test_republished_messages_are_counted_in_metrics(client, clock, publisher):
    """``reminders_sweep_republished_total`` grows by the sweep report's ``republished``:
    the figure to alert on, since each one is a message a queue gave up on (or held late)."""
    before = REGISTRY.get_sample_value("reminders_sweep_republished_total") or 0.0
    await start(client, clock, publisher)
    clock.advance(minutes=31)
    assert (await sweep(client))["republished"] == 1
    assert REGISTRY.get_sample_value("reminders_sweep_republished_total") == before + 1


async def test_a_pending_retry_whose_message_vanished_comes_back(
    client, clock, publisher, provider
):
    """A transient failure, then the queue gives up: republished after next_attempt_at."""
    provider.script.append(TransientProviderError("provider down"))
    [message] = await start(client, clock, publisher)
    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "retry"
    clock.advance(seconds=answer["retry_after"] + 29 * 60)
    assert (await sweep(client))["republished"] == 0
    clock.advance(minutes=2)
    assert (await sweep(client))["republished"] == 1
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["sent"]
    assert len(provider.calls) == 2


async def test_a_send_left_sending_past_its_lease_comes_back(
    client, clock, publisher, provider, container
):
    """A worker died mid-send and the queue dropped the message: reclaimed after the lease."""
    await start(client, clock, publisher)
    async with container.engine.begin() as conn:  # the dead worker's claim
        await ledger_repo.claim_send(
            conn,
            LedgerKey("r1", "email", provider.name),
            now=clock.now,
            lease_until=clock.now + timedelta(seconds=60),
        )
    clock.advance(minutes=30)
    assert (await sweep(client))["republished"] == 0
    clock.advance(minutes=2)
    assert (await sweep(client))["republished"] == 1
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["sent"]
    assert len(provider.calls) == 1


async def test_only_the_lost_channel_is_republished(client, clock, publisher, provider):
    """A two-channel reminder whose email went out: only the webhook message comes back."""
    messages = await start(client, clock, publisher, channels=("email", "webhook"))
    email = next(m for m in messages if m.payload["channel"] == "email")
    assert (await push_message(client, email)).json()["outcome"] == "sent"
    clock.advance(minutes=31)
    assert (await sweep(client))["republished"] == 1
    [again] = publisher.messages
    assert again.payload["channel"] == "webhook"
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["sent"]
    assert sorted(c.message.channel for c in provider.calls) == ["email", "webhook"]


async def test_a_live_retry_is_left_to_its_queue(client, clock, publisher, provider):
    """A retry the queue will still bring back is not republished, however old the reminder."""
    provider.script.append(TransientProviderError("provider down"))
    [message] = await start(client, clock, publisher)
    clock.advance(hours=3)
    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "retry"
    clock.advance(seconds=answer["retry_after"])
    assert (await sweep(client))["republished"] == 0


async def test_a_cancelled_reminder_whose_claim_was_orphaned_is_settled(
    client, clock, publisher, provider, container
):
    """Cancelled after its message went out; a worker claimed it and died before reading the
    reminder, then the queue gave up: the sweep republishes that channel alone, the receiver
    settles the row as cancelled, no provider call, and the audit holds (found by the
    simulation, seed 97, with a queue that gives up after two deliveries)."""
    await start(client, clock, publisher, channels=("email", "webhook"))
    publisher.messages.clear()  # the queue gave up on both messages
    assert (await client.delete("/v1/reminders/r1", headers=API)).status_code in (200, 204)
    async with container.engine.begin() as conn:  # the dead worker's claim of the email
        await ledger_repo.claim_send(
            conn,
            LedgerKey("r1", "email", provider.name),
            now=clock.now,
            lease_until=clock.now + timedelta(seconds=60),
        )
    clock.advance(minutes=31)
    assert (await sweep(client))["republished"] == 1
    [again] = publisher.messages
    assert again.payload["channel"] == "email"
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["cancelled"]
    assert provider.calls == []
    clock.advance(hours=2)
    assert (await sweep(client))["republished"] == 0
    async with container.engine.connect() as conn:
        report = await run_audit(conn, now=clock.now)
    assert report.ok, report.violations


async def test_cancelled_reminders_without_an_open_row_are_left_alone(
    client, clock, publisher, provider
):
    """Cancelled with nothing claimed: nothing is owed, nothing is republished."""
    await start(client, clock, publisher)
    publisher.messages.clear()
    assert (await client.delete("/v1/reminders/r1", headers=API)).status_code in (200, 204)
    clock.advance(hours=3)
    assert (await sweep(client))["republished"] == 0
