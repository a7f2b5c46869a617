"""The PostgreSQL gateway's group statements: many callers, one statement, each its own answer.

With one statement in flight, callers that arrive together while it runs share the next
one: the first caller goes out alone, every later one in a statement of several. That is
deterministic (the later callers queue before the first statement's I/O can finish), so
each case here runs through a real shared statement on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.container import build_container
from app.db.engine import create_engine
from app.db.ledger import PgLedger
from app.db.ledger.postgres import _claim_arrays, _Finalize, _finalize_arrays
from app.db.ledger.postgres_batch_sql import CLAIM_BATCH, finalize_batch_statement
from app.db.ledger.postgres_sql import finalize_statement
from app.db.tables import customers, reminders, send_attempts, send_records
from app.domain.errors import LeaseLost
from app.domain.ledger import AttemptEnd, ClaimRequest, LedgerKey
from app.domain.messages import ReminderView
from tests.support.turns import first_alone_then_together, one_turn_each

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
SENT = {"state": "sent", "outcome": "sent", "sent_at": NOW, "provider_request_id": "req"}

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine(clean_database_url: str, db_backend: str) -> AsyncIterator[AsyncEngine]:
    if db_backend != "postgresql":
        pytest.skip("group statements are the PostgreSQL gateway's")
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
async def ledger(engine: AsyncEngine) -> AsyncIterator[PgLedger]:
    gateway = PgLedger(engine, size=4, statements_in_flight=1)
    yield gateway
    await gateway.close()


async def seed(engine: AsyncEngine, count: int, channels: tuple[str, ...] = ("email",)) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers),
            [
                {"id": f"c{i}", "email": f"u{i}@example.com", "time_zone": "UTC",
                 "opted_out_channels": [], "created_at": NOW, "updated_at": NOW}
                for i in range(count)
            ],
        )  # fmt: skip
        await conn.execute(
            insert(reminders),
            [
                {"id": f"r{i}", "customer_id": f"c{i}", "kind": "weekly_digest", "due_at": NOW,
                 "channels": list(channels), "data": {"n": i}, "state": "enqueued",
                 "schedule_version": 1, "created_at": NOW, "updated_at": NOW}
                for i in range(count)
            ],
        )  # fmt: skip


def key(i: int, channel: str = "email", provider: str = "outbox") -> LedgerKey:
    return LedgerKey(f"r{i}", channel, provider)


def view(i: int, channels: tuple[str, ...] = ("email",)) -> ReminderView:
    return ReminderView(
        id=f"r{i}", customer_id=f"c{i}", kind="weekly_digest", state="enqueued", due_at=NOW,
        expires_at=None, channels=channels, data={}, schedule_version=1,
    )  # fmt: skip


async def claim_all(ledger: PgLedger, keys: list[LedgerKey]):
    return await asyncio.gather(
        *(ledger.claim_or_read(k, now=NOW, lease_until=NOW + LEASE) for k in keys),
        return_exceptions=True,
    )


async def states(engine: AsyncEngine) -> dict[str, str]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(reminders.c.id, reminders.c.state))
        return {row.id: row.state for row in rows}


async def test_concurrent_claims_share_a_statement_and_each_reads_its_own_reminder(ledger, engine):
    await seed(engine, 20)
    claims = await claim_all(ledger, [key(i) for i in range(20)])
    assert ledger._claims.statements == 1  # submitted in one turn: one statement for all 20
    for i, claim in enumerate(claims):
        assert claim.claimed and claim.record.attempt_count == 1
        reminder, customer = claim.context
        assert (reminder.id, reminder.data, customer.email) == (
            f"r{i}",
            {"n": i},
            f"u{i}@example.com",
        )
    again = await claim_all(ledger, [key(i) for i in range(20)])
    assert not any(claim.claimed for claim in again)  # each row is under its lease


async def test_two_claims_of_one_key_never_share_a_statement_and_only_one_wins(ledger, engine):
    await seed(engine, 2)
    claims = await claim_all(ledger, [key(0), key(1), key(1), key(1)])
    assert [claim.claimed for claim in claims] == [True, True, False, False]
    assert claims[2].record.id == claims[1].record.id
    assert claims[2].record.state.value == "sending"


async def test_a_grouped_claim_of_an_unknown_reminder_finds_nothing_and_others_are_claimed(
    ledger, engine
):
    await seed(engine, 3)
    claims = await claim_all(ledger, [key(0), key(1), LedgerKey("nope", "email", "outbox"), key(2)])
    assert [claim.claimed for claim in claims] == [True, True, False, True]
    assert claims[2].record is None


async def test_one_bad_item_fails_only_its_own_caller(ledger, engine):
    """A provider name longer than its column makes PostgreSQL refuse the whole statement;
    each item then runs alone, and only the bad one's caller gets the error."""
    await seed(engine, 3)
    claims = await claim_all(ledger, [key(0), key(1), key(2, provider="p" * 80), key(2)])
    assert claims[0].claimed and claims[1].claimed and claims[3].claimed
    assert "too long" in str(claims[2])
    async with engine.connect() as conn:
        count = (await conn.execute(select(send_records.c.id))).all()
    assert len(count) == 3


async def test_grouped_finalizes_settle_each_reminder_and_fence_each_row(ledger, engine):
    """Finalizes of several reminders, and of both channels of one reminder, share one
    statement; the reminder whose channels are all final is done; a stale attempt is
    refused on its own."""
    await seed(engine, 3)
    await seed_two_channels(engine)
    claims = await claim_all(ledger, [key(0), key(1), key(2), key(9), key(9, "webhook")])
    records = [claim.record for claim in claims]
    stale = dataclasses.replace(records[2], attempt_count=7)
    results = await first_alone_then_together(
        ledger.finalize_send(records[0], view(0), now=NOW, values=SENT),
        ledger.finalize_send(records[1], view(1), now=NOW, values=SENT),
        ledger.finalize_send(stale, view(2), now=NOW, values=SENT),
        ledger.finalize_send(records[3], view(9, ("email", "webhook")), now=NOW, values=SENT),
        ledger.finalize_send(records[4], view(9, ("email", "webhook")), now=NOW, values=SENT),
    )
    assert [r for r in results if r is not None] == [results[2]]
    assert isinstance(results[2], LeaseLost)
    [group] = ledger._finalizes.values()
    assert group.statements == 2
    assert await states(engine) == {"r0": "done", "r1": "done", "r2": "enqueued", "r9": "done"}


async def test_a_finalize_writes_its_attempts_outcome_unless_the_fence_refuses_it(ledger, engine):
    """The attempt's outcome is written by the finalize statement itself, grouped (three
    together) and alone (the first); a stale attempt's finalize writes neither its row nor
    an outcome, and an outcome already written stays."""
    await seed(engine, 4)
    claims = await claim_all(ledger, [key(i) for i in range(4)])
    records = [claim.record for claim in claims]
    stale = dataclasses.replace(records[3], attempt_count=7)
    sent = AttemptEnd("sent", provider_called=True)
    results = await first_alone_then_together(
        ledger.finalize_send(records[0], view(0), now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(records[1], view(1), now=NOW, values=SENT, ended=sent),
        ledger.finalize_send(records[2], view(2), now=NOW, values=SENT),
        ledger.finalize_send(stale, view(3), now=NOW, values=SENT, ended=sent),
    )
    assert isinstance(results[3], LeaseLost)
    [group] = ledger._finalizes.values()
    assert group.statements == 2  # the first alone, the rest together
    await ledger.record_outcome(records[0], AttemptEnd("lease_expired", False), now=NOW)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                select(send_attempts.c.reminder_id, send_attempts.c.outcome,
                       send_attempts.c.provider_called, send_attempts.c.finished_at)
                .order_by(send_attempts.c.reminder_id)
            )
        ).all()  # fmt: skip
    assert [tuple(row) for row in rows] == [
        ("r0", "sent", True, NOW),
        ("r1", "sent", True, NOW),
        ("r2", None, None, None),
        ("r3", None, None, None),
    ]


async def seed_two_channels(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(id="c9", email="u9@example.com", time_zone="UTC",
                                     opted_out_channels=[], created_at=NOW, updated_at=NOW)
        )  # fmt: skip
        await conn.execute(
            insert(reminders).values(
                id="r9", customer_id="c9", kind="weekly_digest", due_at=NOW,
                channels=["email", "webhook"], data={}, state="enqueued", schedule_version=1,
                created_at=NOW, updated_at=NOW,
            )
        )  # fmt: skip


async def test_a_reminder_is_not_done_while_one_of_its_channels_is_open(ledger, engine):
    await seed_two_channels(engine)
    claims = await claim_all(ledger, [key(9), key(9, "webhook")])
    await ledger.finalize_send(
        claims[0].record, view(9, ("email", "webhook")), now=NOW, values=SENT
    )
    assert (await states(engine))["r9"] == "enqueued"
    await ledger.finalize_send(
        claims[1].record, view(9, ("email", "webhook")), now=NOW, values=SENT
    )
    assert (await states(engine))["r9"] == "done"


async def test_a_statement_under_way_finishes_before_the_ledger_closes(ledger, engine):
    await seed(engine, 5)
    pending = asyncio.ensure_future(claim_all(ledger, [key(i) for i in range(5)]))
    await asyncio.sleep(0)
    await ledger.close()
    assert all(claim.claimed for claim in await pending)


async def test_group_statements_are_planned_once_not_on_every_execution(ledger, engine):
    """Left to choose, PostgreSQL re-plans an array statement on every execution (a custom
    plan each time, measured at four times the statement's own cost): the ledger's
    connections run them on their generic plan."""
    await seed(engine, 24)
    for round_ in range(8):  # each round: one statement alone, then two items together
        items = [3 * round_ + i for i in range(3)]
        claims = await claim_all(ledger, [key(i) for i in items])
        await asyncio.gather(
            *(ledger.finalize_send(c.record, view(i), now=NOW, values=SENT)
              for c, i in zip(claims, items, strict=True))
        )  # fmt: skip
    async with ledger.pool.acquire() as conn:
        plans = await conn.fetch(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%unnest(%' AND statement NOT LIKE '%pg_prepared%'"
        )
    assert len(plans) == 2  # the claim and the finalize, prepared once each
    assert all(row["custom_plans"] == 0 and row["generic_plans"] == 8 for row in plans)


async def test_the_setting_bounds_the_statements_in_flight(settings, engine):
    """REMINDERS_DATABASE_GROUP_STATEMENTS reaches the service's ledger: with 2, no more
    than two claim statements run at once however many deliveries wait."""
    container = build_container(settings.model_copy(update={"database_group_statements": 2}))
    try:
        ledger = container.receiver.ledger
        assert isinstance(ledger, PgLedger)
        await seed(engine, 30)
        running = most = 0
        real = ledger._fetch

        async def counted(query, *args):
            nonlocal running, most
            running += 1
            most = max(most, running)
            try:
                return await real(query, *args)
            finally:
                running -= 1

        ledger._fetch = counted  # type: ignore[method-assign]
        claims = await one_turn_each(  # as deliveries arrive: the first ones go out alone
            ledger.claim_or_read(key(i), now=NOW, lease_until=NOW + LEASE) for i in range(30)
        )
        assert all(claim.claimed for claim in claims)
        assert most == 2 and ledger._claims.statements < 30
    finally:
        await container.aclose()


async def test_cached_statements_are_planned_again_within_half_a_minute(ledger, engine):
    """A plan made while the ledger was empty must not outlive the ledger's growth: the
    ledger's connections prepare their statements again after STATEMENT_LIFETIME_SECONDS."""
    from app.db.ledger.pg_pool import STATEMENT_LIFETIME_SECONDS

    await seed(engine, 1)
    await ledger.claim_or_read(key(0), now=NOW, lease_until=NOW + LEASE)
    async with ledger.pool.acquire() as conn:
        lifetime = conn._config.max_cached_statement_lifetime  # asyncpg's own timer
    assert lifetime == STATEMENT_LIFETIME_SECONDS <= 60


async def test_the_group_finalize_finds_its_rows_by_key_not_by_state(ledger, engine):
    """With 'sending' rare in the statistics, the planner read the (state, lease_until) index
    for every entry of 'sending', dead ones included until a vacuum (63,518 entries, 7-13 ms
    for 20 rows in a 100,000-reminder run). The fence must not be an index condition."""
    await seed(engine, 200)
    claims = await claim_all(ledger, [key(i) for i in range(200)])
    async with engine.begin() as conn:
        await conn.execute(update(send_records).values(state="sent"))
        await conn.exec_driver_sql("ANALYZE send_records")
    items = [
        _Finalize(claim.record.id, 1, NOW, f"r{i}", 1, (None, None, None), ("sent", "sent"))
        for i, claim in enumerate(claims[:20])
    ]
    pool = await ledger.pool
    async with pool.acquire() as conn:
        plan = await conn.fetchval(
            "EXPLAIN (FORMAT JSON) " + finalize_batch_statement(("state", "outcome")),
            *_finalize_arrays(items),
        )
    assert "ix_send_records_state_lease_until" not in plan


async def test_statements_planned_on_a_nearly_empty_ledger_still_find_rows_by_key(ledger, engine):
    """A generic plan is made for the table as it is then and kept: one made while the
    ledger held a handful of rows read all of send_records for every statement later (a
    sequential scan filtering out ~14,700 rows, 12 ms per group finalize, in the first half
    minute of a 50,000-reminder run, until the statement was planned again). Planned on a
    nearly empty ledger, the claim and the finalizes look every row up by key."""
    await seed(engine, 20)
    claims = await claim_all(ledger, [key(i) for i in range(20)])
    items = [
        _Finalize(claim.record.id, 1, NOW, f"r{i}", 1, (None, None, None), ("sent", "sent"))
        for i, claim in enumerate(claims)
    ]
    statements = {
        "group finalize": (finalize_batch_statement(("state", "outcome")), _finalize_arrays(items)),
        "finalize": (
            finalize_statement(("state", "outcome")),
            [claims[0].record.id, 1, NOW, "r0", 1, None, None, None, "sent", "sent"],
        ),
        "finalize in a group's turn": (
            finalize_statement(("state", "outcome"), skip_locked=True),
            [claims[1].record.id, 1, NOW, "r1", 1, None, None, None, "sent", "sent"],
        ),
        "group claim": (CLAIM_BATCH, _claim_arrays([ClaimRequest(key(0), NOW, NOW + LEASE)])),
    }
    pool = await ledger.pool
    async with pool.acquire() as conn:  # the ledger's session: generic plans
        for name, (sql, args) in statements.items():
            plan = [row[0] for row in await (await conn.prepare("EXPLAIN " + sql)).fetch(*args)]
            scans = [line for line in plan if "Seq Scan" in line]
            assert scans == [], name + ":\n" + "\n".join(plan)
