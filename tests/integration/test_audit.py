"""``reminders audit`` finds each broken invariant on a real database, names the ids, and
passes on a healthy one; the states defects 3 and 4 left behind are among those it finds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from sqlalchemy import event, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.tables import dead_letters, reminders, send_attempts, send_records
from app.services.audit import repair_final_reminders, run_audit
from tests.support.ledger_states import (
    HOUR,
    NOW,
    add_customer,
    add_dead_letter,
    add_dead_message,
    add_reminder,
    add_send,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine(clean_database_url: str) -> AsyncIterator[AsyncEngine]:
    built = create_engine(clean_database_url)
    await add_customer(built)
    yield built
    await built.dispose()


async def audit(engine: AsyncEngine, at: datetime = NOW + 2 * HOUR) -> dict[str, list[str]]:
    """The violations found at ``at``, only the invariants that failed."""
    async with engine.connect() as conn:
        report = await run_audit(conn, now=at)
    return {name: sorted(ids) for name, ids in report.violations.items() if ids}


async def test_a_healthy_ledger_passes(engine):
    """Done, cancelled, in-flight and future reminders with consistent rows: no violation."""
    await add_reminder(engine, "done", state="done")
    for channel in ("email", "webhook"):
        await add_send(engine, "done", channel, "sent")
    await add_reminder(engine, "cancelled", state="cancelled")
    await add_reminder(engine, "retrying", channels=("email",))
    await add_send(engine, "retrying", "email", "pending", next_attempt_at=NOW + 3 * HOUR)
    await add_reminder(engine, "future", state="scheduled", due_at=NOW + 48 * HOUR)
    await add_reminder(engine, "dead", state="done", channels=("email",))
    dead_row = await add_send(engine, "dead", "email", "dead")
    await add_dead_letter(engine, "m-dead", send_record_id=dead_row)
    await add_dead_message(engine, "m-dead", "dead", "email")
    assert await audit(engine) == {}


async def test_defect_4_a_reminder_left_enqueued_with_every_channel_final_is_named(engine):
    """What the two-channel race left behind fails the audit, and the repair settles it."""
    await add_reminder(engine, "stuck")
    await add_send(engine, "stuck", "email", "sent")
    await add_send(engine, "stuck", "webhook", "terminal_failure")
    assert await audit(engine) == {"final_not_settled": ["stuck"]}
    async with engine.begin() as conn:
        assert await repair_final_reminders(conn, now=NOW) == 1
    assert await audit(engine) == {}
    async with engine.connect() as conn:
        state = (await conn.execute(select(reminders.c.state))).scalar_one()
    assert state == "done"


async def test_defect_3_a_message_the_queue_gave_up_on_is_named(engine):
    """A reminder whose message died in the queue's dead list with no ledger row: overdue
    without a live message, and a dead message nobody recorded."""
    await add_reminder(engine, "lost", channels=("email",))
    await add_dead_message(engine, "m-lost", "lost", "email")
    assert await audit(engine) == {
        "overdue_without_message": ["lost"],
        "dead_message_unrecorded": ["reminders:m-lost"],
    }
    assert await audit(engine, at=NOW + HOUR / 2) == {
        "dead_message_unrecorded": ["reminders:m-lost"]
    }


async def test_each_other_invariant_names_its_ids(engine):
    """A channel sent by two providers, a lease long expired, a never-published reminder,
    a retry long overdue, and dead letters that disagree with their rows."""
    await add_reminder(engine, "twice", state="done", channels=("email",))
    await add_send(engine, "twice", "email", "sent", provider="smtp")
    await add_send(engine, "twice", "email", "sent", provider="email_api")
    await add_reminder(engine, "leased", channels=("email",), due_at=NOW + 48 * HOUR)
    await add_send(engine, "leased", "email", "sending", lease_until=NOW)
    await add_reminder(engine, "unswept", state="scheduled", channels=("email",))
    await add_reminder(engine, "abandoned", channels=("email",))
    await add_send(engine, "abandoned", "email", "pending", next_attempt_at=NOW)
    await add_reminder(engine, "letters", state="done")
    live = await add_send(engine, "letters", "email", "sent")
    await add_dead_letter(engine, "m-1", send_record_id=live)
    await add_send(engine, "letters", "webhook", "dead")
    async with engine.connect() as conn:
        letter = (await conn.execute(select(dead_letters.c.id))).scalar_one()
    assert await audit(engine) == {
        "sent_twice": ["twice:email"],
        "lease_long_expired": ["leased:email:outbox"],
        "overdue_without_message": ["abandoned", "unswept"],
        "dead_letter_mismatch": [f"dead_letter:{letter}", "letters:webhook:outbox"],
    }


async def _attempt(engine: AsyncEngine, record_id: int, rid: str, provider: str, outcome: str):
    async with engine.begin() as conn:
        await conn.execute(
            insert(send_attempts).values(
                send_record_id=record_id, reminder_id=rid, channel="email", provider=provider,
                attempt=1, claimed_by="test", claimed_at=NOW, provider_deduplicates=False,
                provider_called=True, outcome=outcome, finished_at=NOW,
            )
        )  # fmt: skip


async def test_a_send_failed_over_after_a_proven_refusal_passes(engine):
    """Failover: SES refused (503, handed over), SMTP sent; the reminder done. No violation."""
    await add_reminder(engine, "moved", state="done", channels=("email",))
    ses = await add_send(engine, "moved", "email", "terminal_failure", provider="ses")
    async with engine.begin() as conn:
        await conn.execute(
            update(send_records).where(send_records.c.id == ses).values(outcome="failed_over")
        )
    await _attempt(engine, ses, "moved", "ses", "provider_5xx")
    smtp = await add_send(engine, "moved", "email", "sent", provider="smtp")
    await _attempt(engine, smtp, "moved", "smtp", "sent")
    assert await audit(engine) == {}


async def test_two_providers_that_may_each_have_accepted_a_send_are_named(engine):
    """SES timed out after sending (unknown outcome), then SMTP sent: the customer may
    have the email twice, so the audit fails on it (``accepted_by_two_providers``)."""
    await add_reminder(engine, "doubled", state="done", channels=("email",))
    ses = await add_send(engine, "doubled", "email", "dead", provider="ses")
    await add_dead_letter(engine, "m-doubled", send_record_id=ses)
    await _attempt(engine, ses, "doubled", "ses", "unknown_outcome")
    smtp = await add_send(engine, "doubled", "email", "sent", provider="smtp")
    await _attempt(engine, smtp, "doubled", "smtp", "sent")
    assert await audit(engine) == {"accepted_by_two_providers": ["doubled:email"]}


async def test_no_correlated_lookup_of_the_audit_reads_a_table_by_state_alone(engine, db_backend):
    """SQLite plans without statistics: an equality on (state, lease_until) won over the
    (reminder, channel, provider) key in the twin-send lookup, so every audit read all sent
    rows once per sent row (1.2 s at 5,000 reminders, on SQLite's one connection, every
    metrics interval). Each correlated lookup must go by a key, never by state alone."""
    if db_backend != "sqlite":
        pytest.skip("the plans checked are SQLite's (PostgreSQL plans with statistics)")
    statements: list[tuple[str, object]] = []

    def keep(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            statements.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", keep)
    try:
        await audit(engine)
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", keep)
    assert statements
    by_state_alone = []
    async with engine.connect() as conn:
        for statement, parameters in statements:
            plan = (await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)).all()
            inside = {row[0] for row in plan if "CORRELATED" in row[3]}
            for row in plan:
                if row[1] in inside and ("(state=?)" in row[3] or row[3].startswith("SCAN")):
                    by_state_alone.append(f"{row[3]} in {statement[:120]}")
    assert by_state_alone == []
