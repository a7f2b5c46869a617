"""The failover rule in the ledger, on both gateways: a second provider of a (reminder,
channel) may be claimed only once every other provider's row is handed over, and a row is
handed over only when the ledger proves its provider never accepted the message.

``core`` runs on the run's database (SQLite or PostgreSQL), ``pg`` (the raw asyncpg
statements) with ``--db postgresql`` only: the rule is one definition spliced into both.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.ledger import LedgerGateway
from app.db.tables import reminders, send_attempts, send_records
from app.domain.ledger import AttemptEnd, Claim, LedgerKey
from app.domain.states import SendState
from tests.integration.test_ledger_gateways import LEASE, NOW, SENT, both, row, seed, the_reminder

pytestmark = pytest.mark.anyio


SES = LedgerKey("rem-1", "email", "ses")
SMTP = LedgerKey("rem-1", "email", "smtp")
PENDING_503 = {
    "state": "pending",
    "outcome": None,
    "next_attempt_at": NOW + timedelta(minutes=5),
    "last_error_class": "provider_5xx",
    "last_error": "Postmark answered 503",
}


async def claim(ledger: LedgerGateway, key: LedgerKey, earlier: tuple[str, ...], at=NOW) -> Claim:
    """A failover claim (the rule applies) with the standard lease."""
    return await ledger.claim_or_read(key, now=at, lease_until=at + LEASE, earlier=earlier)


async def fail_ses(ledger: LedgerGateway, db: AsyncEngine, error_class: str = "provider_5xx"):
    """One attempt at SES (the claim appends its attempt) that ended with ``error_class``
    (row pending, outcome recorded)."""
    found = await claim(ledger, SES, ())
    assert found.claimed and found.record is not None
    values = PENDING_503 | {"last_error_class": error_class}
    await ledger.finalize_failed_send(
        found.record, await the_reminder(db), now=NOW, values=values, dead_letter=None,
        disable_webhook=False,
    )  # fmt: skip
    await ledger.record_outcome(found.record, AttemptEnd(error_class, True, error_class), now=NOW)
    await asyncio.sleep(0)


@both
async def test_the_second_provider_is_refused_until_the_first_hands_over(gateway, engine):
    """No row for the first provider: the second is not claimed (and nothing is written)."""
    await seed(engine)
    assert await claim(gateway, SMTP, ("ses",)) == Claim(False, None)
    async with engine.connect() as conn:
        assert (await conn.execute(select(send_records))).all() == []


@both
async def test_a_circuit_open_before_any_attempt_hands_over_then_the_second_is_claimed(
    gateway, engine
):
    """Hand-over of a provider that never had a row writes it final and failed over; the
    next provider's claim then succeeds, and the first can no longer be claimed."""
    await seed(engine)
    assert await gateway.hand_over(SES, now=NOW)
    stored = await row(engine, SES)
    assert (stored["state"], stored["outcome"], stored["last_error_class"]) == (
        "terminal_failure", "failed_over", "circuit_open",
    )  # fmt: skip
    assert (await claim(gateway, SMTP, ("ses",))).claimed
    assert not (await claim(gateway, SES, ())).claimed
    rows = await gateway.channel_rows("rem-1", "email")
    assert (rows["ses"].handed_over, rows["smtp"].handed_over) == (True, False)
    assert rows["smtp"].record.state == SendState.SENDING


@both
async def test_a_refused_answer_before_acceptance_lets_the_send_move_on(gateway, engine):
    """SES answered 503 (pending, its attempt recorded as such): it hands over."""
    await seed(engine)
    await fail_ses(gateway, engine)
    await asyncio.sleep(0.05)  # the attempts' history is written in shared statements
    assert await gateway.hand_over(SES, now=NOW)
    assert (await claim(gateway, SMTP, ("ses",))).claimed


@both
async def test_an_unknown_outcome_blocks_failover(gateway, engine):
    """A timeout after the request was sent: the row stays SES's, SMTP is never claimed."""
    await seed(engine)
    await fail_ses(gateway, engine, error_class="unknown_outcome")
    await asyncio.sleep(0.05)
    assert not await gateway.hand_over(SES, now=NOW)
    assert (await row(engine, SES))["state"] == "pending"
    assert await claim(gateway, SMTP, ("ses",)) == Claim(False, None)


@both
async def test_an_earlier_unknown_outcome_blocks_even_after_a_later_refusal(gateway, engine):
    """Attempt 1 timed out after sending, attempt 2 got a 503: attempt 1 may still have
    been accepted, so the send does not move on."""
    await seed(engine)
    await fail_ses(gateway, engine, error_class="unknown_outcome")
    later = NOW + timedelta(minutes=6)
    second = await claim(gateway, SES, (), at=later)
    assert second.claimed and second.record is not None
    await gateway.finalize_failed_send(
        second.record, await the_reminder(engine), now=later,
        values=PENDING_503 | {"next_attempt_at": later + timedelta(minutes=5)},
        dead_letter=None, disable_webhook=False,
    )  # fmt: skip
    await asyncio.sleep(0.05)
    assert not await gateway.hand_over(SES, now=later)


@both
async def test_an_attempt_without_a_recorded_outcome_blocks_failover(gateway, engine):
    """The attempt's outcome is not written (its worker died after calling, or not yet)."""
    await seed(engine)
    await fail_ses(gateway, engine)
    async with engine.begin() as conn:
        await conn.execute(update(send_attempts).values(outcome=None, provider_called=None))
    assert not await gateway.hand_over(SES, now=NOW)


@both
async def test_a_held_first_provider_blocks_the_second(gateway, engine):
    """SES's row is sending (another replica holds it): no hand-over, no SMTP claim."""
    await seed(engine)
    assert (await claim(gateway, SES, ())).claimed
    assert not await gateway.hand_over(SES, now=NOW)
    assert await claim(gateway, SMTP, ("ses",)) == Claim(False, None)


@both
async def test_a_sent_second_provider_blocks_a_reordered_first(gateway, engine):
    """The list was reordered (smtp first now) while SES holds the send: SMTP is refused."""
    await seed(engine)
    assert (await claim(gateway, SES, ())).claimed
    assert await claim(gateway, SMTP, ()) == Claim(False, None)


@both
async def test_the_reminder_is_done_only_when_the_second_provider_is_final(gateway, engine):
    """A handed-over row is final but does not settle its channel; the send that follows does."""
    await seed(engine)
    assert await gateway.hand_over(SES, now=NOW)
    found = await claim(gateway, SMTP, ("ses",))
    assert found.record is not None
    async with engine.connect() as conn:
        state = (await conn.execute(select(reminders.c.state))).scalar_one()
    assert state == "enqueued"
    await gateway.finalize_send(found.record, await the_reminder(engine), now=NOW, values=SENT)
    async with engine.connect() as conn:
        assert (await conn.execute(select(reminders.c.state))).scalar_one() == "done"


@both
async def test_a_hand_over_racing_a_claim_of_the_first_provider_lets_one_win(gateway, engine):
    """Concurrent: one replica hands SES over while another claims it; exactly one wins,
    and SMTP is claimable only if the hand-over did."""
    await seed(engine)
    for _ in range(5):
        async with engine.begin() as conn:
            await conn.execute(send_records.delete())
        handed, claimed = await asyncio.gather(
            gateway.hand_over(SES, now=NOW), claim(gateway, SES, ())
        )
        assert handed != claimed.claimed
        assert (await claim(gateway, SMTP, ("ses",))).claimed == handed
