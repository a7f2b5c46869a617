"""Retention: what is purged and what is kept, at the edges of the retention period."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_engine
from app.db.tables import customers, dead_letters, reminders, send_records
from app.services.retention import RetentionPolicy, preview_purge, purge
from app.services.sweep import SweepLimits, sweep
from tests.support.clock import FakeClock
from tests.support.dead_letters import (
    ADMIN_TOKEN,
    admin_get,
    admin_post,
    exhaust,
    publish_reminder,
)
from tests.support.flow import API, push_message, put_customer, put_reminder
from tests.support.flow import sweep as cron_sweep
from tests.support.recording import RecordingPublisher

T0 = FakeClock().now
POLICY = RetentionPolicy(days=90, batch_size=2)
EDGE = T0 + timedelta(days=90)  # cutoff == T0: rows changed at T0 are kept until after EDGE
TICK = timedelta(microseconds=1)


@pytest.fixture
async def engine(clean_database_url: str):
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


async def _reminder(
    engine: AsyncEngine, rid: str, state: str, *, at: datetime, sends: tuple[str, ...] = ()
) -> list[int]:
    """A reminder last changed at ``at`` with one send record per given send state."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(reminders).values(
                id=rid,
                customer_id="c1",
                kind="renewal",
                due_at=at,
                channels=["email"],
                data={},
                state=state,
                schedule_version=1,
                created_at=at,
                updated_at=at,
            )
        )
        ids = []
        for n, send_state in enumerate(sends):
            row = await conn.execute(
                insert(send_records)
                .values(
                    reminder_id=rid,
                    channel="email",
                    provider=f"p{n}",
                    state=send_state,
                    lease_until=at + timedelta(minutes=5) if send_state == "sending" else None,
                    idempotency_key=f"{rid}:{n}",
                    created_at=at,
                    updated_at=at,
                )
                .returning(send_records.c.id)
            )
            ids.append(row.scalar_one())
        return ids


async def _dead_letter(
    engine: AsyncEngine,
    *,
    redriven_at: datetime | None,
    send_id: int | None = None,
    reminder_id: str | None = None,
) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            insert(dead_letters).values(
                send_record_id=send_id,
                reminder_id=reminder_id,
                queue="reminders",
                reason="attempts_exhausted" if send_id else "unknown_reminder",
                redriven_at=redriven_at,
                created_at=T0 - timedelta(days=1),
            )
        )


async def _ids(engine: AsyncEngine, table: Any) -> set[Any]:
    async with engine.connect() as conn:
        return set((await conn.execute(select(table.c.id))).scalars())


async def _seed(engine: AsyncEngine) -> dict[str, list[int]]:
    async with engine.begin() as conn:
        await conn.execute(
            insert(customers).values(
                id="c1",
                email="c1@example.com",
                time_zone="UTC",
                opted_out_channels=[],
                created_at=T0,
                updated_at=T0,
            )
        )
    sends = {
        "done:old": await _reminder(engine, "done:old", "done", at=T0 - TICK, sends=("sent",)),
        "done:edge": await _reminder(engine, "done:edge", "done", at=T0, sends=("sent", "dead")),
        "cancelled:old": await _reminder(engine, "cancelled:old", "cancelled", at=T0 - TICK),
        "cancelled:edge": await _reminder(engine, "cancelled:edge", "cancelled", at=T0),
        "cancelled:sending": await _reminder(
            engine, "cancelled:sending", "cancelled", at=T0 - TICK, sends=("sending",)
        ),
        "cancelled:retrying": await _reminder(
            engine, "cancelled:retrying", "cancelled", at=T0 - TICK, sends=("pending", "sent")
        ),
        "done:open-dead-letter": await _reminder(
            engine, "done:open-dead-letter", "done", at=T0 - TICK, sends=("dead",)
        ),
        "done:redriven": await _reminder(
            engine, "done:redriven", "done", at=T0 - TICK, sends=("sent",)
        ),
        "enqueued:old": await _reminder(engine, "enqueued:old", "enqueued", at=T0 - TICK),
        "scheduled:old": await _reminder(engine, "scheduled:old", "scheduled", at=T0 - TICK),
    }
    await _dead_letter(engine, redriven_at=None, send_id=sends["done:open-dead-letter"][0])
    await _dead_letter(engine, redriven_at=T0 - TICK, send_id=sends["done:redriven"][0])
    await _dead_letter(engine, redriven_at=T0, send_id=sends["done:edge"][1])
    await _dead_letter(engine, redriven_at=T0 - TICK, reminder_id="gone")
    await _dead_letter(engine, redriven_at=T0, reminder_id="gone")
    await _dead_letter(engine, redriven_at=None, reminder_id="gone")
    return sends


KEPT_AT_EDGE = {
    "done:edge",
    "cancelled:edge",
    "cancelled:sending",
    "cancelled:retrying",
    "done:open-dead-letter",
    "enqueued:old",
    "scheduled:old",
}


async def test_purge_deletes_only_finished_rows_older_than_the_period(engine):
    """Done/cancelled reminders changed strictly before the cutoff go with their sends and
    redriven dead letters; a reminder with a send in flight, waiting for a retry or with an
    open dead letter stays, as do unfinished reminders and anything changed at the cutoff."""
    sends = await _seed(engine)
    report = await purge(engine, now=EDGE, policy=POLICY)

    assert await _ids(engine, reminders) == KEPT_AT_EDGE
    assert report.counts == {"reminders": 3, "send_records": 2, "dead_letters": 2}
    assert report.complete and report.cutoff == T0
    kept_sends = await _ids(engine, send_records)
    assert set(sends["done:old"] + sends["done:redriven"]).isdisjoint(kept_sends)
    assert set(sends["cancelled:retrying"]) <= kept_sends  # the pending one keeps its siblings
    async with engine.connect() as conn:
        left = (await conn.execute(select(dead_letters.c.redriven_at))).scalars().all()
    assert sorted(left, key=lambda at: (at is not None, at or T0)) == [None, None, T0, T0]


async def test_one_microsecond_later_the_edge_rows_go_too(engine):
    """A row changed exactly at the cutoff is kept; a tick later it is purged."""
    await _seed(engine)
    await purge(engine, now=EDGE, policy=POLICY)
    report = await purge(engine, now=EDGE + TICK, policy=POLICY)

    assert report.counts == {"reminders": 2, "send_records": 2, "dead_letters": 2}
    assert await _ids(engine, reminders) == KEPT_AT_EDGE - {"done:edge", "cancelled:edge"}
    assert len(await _ids(engine, dead_letters)) == 2  # the two open ones


async def test_dry_run_counts_what_a_purge_deletes_and_deletes_nothing(engine):
    """The preview's counts equal the purge's, and the preview leaves every row in place."""
    await _seed(engine)
    before = await _ids(engine, reminders)
    preview = await preview_purge(engine, now=EDGE + TICK, policy=POLICY)
    assert await _ids(engine, reminders) == before
    report = await purge(engine, now=EDGE + TICK, policy=POLICY)
    assert preview.dry_run and preview.counts == report.counts


async def test_purge_stops_when_the_time_budget_is_spent_and_resumes_later(engine):
    """Out of time after one batch: a partial report; the next purge finishes the job."""
    await _seed(engine)
    checks = iter([False])
    first = await purge(
        engine, now=EDGE + TICK, policy=POLICY, out_of_time=lambda: next(checks, True)
    )
    assert not first.complete and first.counts["reminders"] == POLICY.batch_size
    second = await purge(engine, now=EDGE + TICK, policy=POLICY)
    assert second.complete
    assert first.counts["reminders"] + second.counts["reminders"] == 5


async def test_nothing_is_purged_before_the_period(engine):
    """With the clock inside the retention period nothing is old enough."""
    await _seed(engine)
    report = await purge(engine, now=T0 + timedelta(days=89), policy=POLICY)
    assert report.counts == {"reminders": 0, "send_records": 0, "dead_letters": 0}


async def test_discarded_letters_go_by_their_discard_time_and_stop_holding_a_reminder(engine):
    """A letter discarded before the cutoff is purged like a redriven one (the preview counts
    it), one discarded at the cutoff stays; a discarded letter no longer keeps its reminder."""
    await _seed(engine)
    await _reminder(engine, "done:discarded", "done", at=T0 - TICK)
    async with engine.begin() as conn:
        for at, reminder_id in ((T0 - TICK, "done:discarded"), (T0, "gone")):
            await conn.execute(
                insert(dead_letters).values(
                    reminder_id=reminder_id,
                    queue="reminders",
                    reason="unknown_reminder",
                    discarded_at=at,
                    created_at=T0 - timedelta(days=1),
                )
            )
    preview = await preview_purge(engine, now=EDGE, policy=POLICY)
    report = await purge(engine, now=EDGE, policy=POLICY)

    assert report.counts["dead_letters"] == preview.counts["dead_letters"] == 3
    assert report.counts["reminders"] == 4 and "done:discarded" not in await _ids(engine, reminders)
    async with engine.connect() as conn:
        left = (await conn.execute(select(dead_letters.c.discarded_at))).scalars().all()
    assert sorted(left, key=lambda at: (at is not None, at or T0)) == [None] * 4 + [T0]


def _sweep(engine, clock, publisher, *, budget: float, monotonic):
    return sweep(
        engine,
        publisher,
        queue_for=lambda channel: f"q-{channel}",
        clock=clock,
        limits=SweepLimits(batch_size=10, time_budget_seconds=budget),
        retention=POLICY,
        monotonic=monotonic,
    )


async def test_the_sweep_purges_after_publishing_with_the_budget_left(engine):
    """Due reminders (scheduled:old) are published first, and the catch-up republishes the
    enqueued one whose message never came back (enqueued:old) and the cancelled one whose
    claim was left 'sending' long ago (cancelled:sending, so the receiver can settle it);
    old finished ones go with the budget left."""
    await _seed(engine)
    clock = FakeClock(EDGE + TICK)
    recorder = RecordingPublisher(clock)
    report = await _sweep(engine, clock, recorder, budget=60, monotonic=lambda: 0.0)
    assert (report.enqueued, report.republished) == (1, 2)
    assert recorder.publish_counts() == {
        ("scheduled:old", "email"): 1,
        ("enqueued:old", "email"): 1,
        ("cancelled:sending", "email"): 1,
    }
    assert report.purged is not None and report.purged.counts["reminders"] == 5
    assert report.to_json()["purged"]["reminders"] == 5
    assert "done:old" not in await _ids(engine, reminders)


async def test_a_sweep_whose_budget_went_on_publishing_purges_nothing(engine):
    """Publishing spent the whole budget: the purge is left for the next sweep."""
    await _seed(engine)
    clock = FakeClock(EDGE + TICK)
    elapsed = [0.0]

    async def publishing_takes_the_budget():
        elapsed[0] += 60

    recorder = RecordingPublisher(clock)
    recorder.before_batch = publishing_takes_the_budget
    report = await _sweep(engine, clock, recorder, budget=60, monotonic=lambda: elapsed[0])
    assert report.enqueued == 1
    assert report.purged is not None and not report.purged.complete
    assert report.purged.counts == {"reminders": 0, "send_records": 0, "dead_letters": 0}
    assert "done:old" in await _ids(engine, reminders)


async def test_the_cron_sweep_purges_with_the_configured_retention(client, clock):
    """Through HTTP: a reminder cancelled 90 days and a tick ago is purged by the cron
    sweep, which says so; the API then answers 404 for it, like any unknown id."""
    await put_customer(client, "c1")
    await put_reminder(client, "r-old", customer_id="c1", due_at=clock.now + timedelta(days=1))
    await client.delete("/v1/reminders/r-old", headers=API)
    await put_reminder(client, "r-next", customer_id="c1", due_at=clock.now + timedelta(days=99))
    clock.advance(days=90, microseconds=1)
    report = await cron_sweep(client)
    assert report["purged"]["reminders"] == 1 and report["purged"]["complete"] is True
    assert (await client.get("/v1/reminders/r-old", headers=API)).status_code == 404
    assert (await client.get("/v1/reminders/r-next", headers=API)).status_code == 200


async def test_the_operator_views_work_on_what_the_purge_left(client, clock, publisher, provider):
    """After a purge the admin page, the dead-letter listing and the reminder API still
    answer: the exhausted reminder (open dead letter) stays with its ledger history, the
    delivered one is gone, and the open dead letter can still be redriven."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    sent = await publish_reminder(client, publisher, clock, "r:sent")
    assert (await push_message(client, sent)).json()["outcome"] == "sent"
    clock.advance(days=91)
    assert (await cron_sweep(client))["purged"]["reminders"] >= 1

    assert (await client.get("/v1/reminders/r:sent", headers=API)).status_code == 404
    kept = (await client.get("/v1/reminders/r:dead", headers=API)).json()
    assert kept["send_records"][0]["state"] == "dead"
    [letter] = (await admin_get(client, "/v1/dead-letters"))["items"]
    assert letter["reminder_id"] == "r:dead"
    login = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    cookie = {"Cookie": login.headers["set-cookie"].split(";", 1)[0]}
    page = await client.get("/admin", headers=cookie)
    assert page.status_code == 200 and "attempts_exhausted" in page.text
    redriven = await admin_post(client, f"/v1/dead-letters/{letter['id']}/redrive")
    assert redriven["published"] == 1
