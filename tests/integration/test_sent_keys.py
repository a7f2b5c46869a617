"""Duplicates of a key this process sent are answered without the database, and only those.

The receiver keeps the keys its own committed finalizes marked ``sent`` (``SentKeys``) for a
minute; dead and terminal rows, which a redrive puts back to pending, are never kept, nor is
a send cut off before its finalize. Where a test must see that the database was not asked,
it changes the rows behind the receiver's back: only an answer from memory stays the same.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete

from app.db.tables import reminders, send_records
from app.domain.ledger import LedgerKey
from app.domain.messages import Delivery
from app.services.receive import SentKeys, receive_delivery
from tests.integration.test_leases import message
from tests.support.dead_letters import admin_get, admin_post, exhaust
from tests.support.flow import push_message
from tests.support.rows import dead_letter_rows, send_record_rows

pytestmark = pytest.mark.anyio
__all__ = ["message"]  # r1 swept, its queue message (the lease tests' fixture)

KEY = LedgerKey("r1", "email", "scripted")
KEY_TIME = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


async def answer_of(client, published) -> tuple[int, dict]:
    """(status, JSON body) of one push of a queue message."""
    response = await push_message(client, published)
    return response.status_code, response.json()


async def forget_r1(container) -> None:
    """Remove r1 and its ledger row behind the receiver's back."""
    async with container.engine.begin() as conn:
        await conn.execute(delete(send_records).where(send_records.c.reminder_id == "r1"))
        await conn.execute(delete(reminders).where(reminders.c.id == "r1"))


async def test_a_duplicate_of_a_key_sent_here_is_answered_from_memory_for_a_minute(
    client, container, clock, provider, message
):
    """After the send, a copy is a duplicate of attempt 1 even with the rows gone (no
    statement ran); a minute later the key is forgotten and the database answers."""
    assert (await answer_of(client, message))[1]["outcome"] == "sent"
    await forget_r1(container)
    clock.advance(seconds=59)
    status, body = await answer_of(client, message)
    assert (status, body["outcome"], body["attempt"]) == (200, "duplicate", 1)
    assert await dead_letter_rows(container.engine) == []
    clock.advance(seconds=1)
    status, body = await answer_of(client, message)
    assert (status, body["outcome"]) == (200, "rejected")  # unknown reminder, quarantined
    assert len(provider.calls) == 1


async def test_copies_racing_the_send_wait_for_the_database_then_share_its_answer(
    client, container, clock, provider, message
):
    """A copy arriving while the first is sending is busy (nothing kept); copies after the
    finalize are duplicates, from memory and, once forgotten, from the database alike."""
    provider.gate = asyncio.Event()
    first = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    status, body = await answer_of(client, message)
    assert (status, body["outcome"]) == (503, "busy")
    assert container.receiver.sent.get(KEY, clock.now) is None
    provider.gate.set()
    assert (await first).json()["outcome"] == "sent"
    remembered = (await answer_of(client, message))[1]
    clock.advance(minutes=5)
    from_database = (await answer_of(client, message))[1]
    assert remembered == from_database
    assert remembered["outcome"] == "duplicate" and remembered["attempt"] == 1
    assert len(provider.calls) == 1


async def test_a_send_cut_off_before_its_finalize_is_not_kept(
    client, container, clock, provider, message
):
    """A delivery cancelled while the provider runs (a crash) keeps nothing: after the
    lease the redelivery claims attempt 2 and sends; that attempt is then remembered."""
    provider.gate = asyncio.Event()
    delivery = Delivery(message.queue, message.message_id, message.payload)
    crashed = asyncio.create_task(receive_delivery(container.receiver, delivery))
    await provider.entered.wait()
    crashed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await crashed
    assert container.receiver.sent.get(KEY, clock.now) is None
    provider.gate = None
    clock.advance(seconds=60)
    status, body = await answer_of(client, message)
    assert (status, body["outcome"], body["attempt"]) == (200, "sent", 2)
    assert container.receiver.sent.get(KEY, clock.now) == 2
    [row] = await send_record_rows(container.engine)
    assert (row["state"], row["attempt_count"]) == ("sent", 2)


async def test_a_dead_send_is_not_kept_so_its_redrive_sends(client, clock, publisher, provider):
    """A copy of a dead send is answered dead-lettered by the database; after a redrive the
    same key is claimed again and sent, not answered from memory."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    [item] = (await admin_get(client, "/v1/dead-letters"))["items"]
    await admin_post(client, f"/v1/dead-letters/{item['id']}/redrive")
    [redriven] = publisher.drain()
    answer = (await push_message(client, redriven)).json()
    assert (answer["outcome"], answer["attempt"]) == ("sent", 4)
    assert len(provider.calls) == 4


def test_keys_are_bounded_oldest_first_and_kept_under_half_the_retention():
    """Past its size the oldest key goes; a short retention shortens how long keys live."""
    kept = SentKeys(size=2)
    now = KEY_TIME
    for index in range(3):
        kept.add(LedgerKey(f"r{index}", "email", "p"), 1, sent_at=now)
    assert [kept.get(LedgerKey(f"r{i}", "email", "p"), now) for i in range(3)] == [None, 1, 1]
    assert kept.get(LedgerKey("r2", "email", "other"), now) is None  # another provider's send
    kept.add(LedgerKey("r3", "sms", "p"), 70_000, sent_at=now)  # an attempt too large to pack
    assert kept.get(LedgerKey("r3", "sms", "p"), now) is None  # is left to the database
    assert SentKeys.seconds_for_retention(0) == 60.0  # retention off: rows are never purged
    assert SentKeys.seconds_for_retention(90) == 60.0
    assert SentKeys.seconds_for_retention(0.0005) == pytest.approx(21.6)
    brief = SentKeys(seconds=SentKeys.seconds_for_retention(0.0005))
    brief.add(KEY, 1, sent_at=now)
    assert brief.get(KEY, now + timedelta(seconds=21)) == 1
    assert brief.get(KEY, now + timedelta(seconds=22)) is None
