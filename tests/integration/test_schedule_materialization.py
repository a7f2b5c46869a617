"""Materialization works in bounded passes that resume exactly where the last one stopped."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from app.services.materialize import OCCURRENCES_PER_PASS, materialize_schedules
from tests.support.flow import API, put_customer, sweep
from tests.support.schedules import occurrence_rows, put_schedule

pytestmark = pytest.mark.anyio


async def test_a_dense_schedule_is_materialized_in_bounded_passes(client, container, clock):
    """Every 5 minutes for 7 days is 2016 occurrences: 500 per pass, none missed or repeated."""
    await put_customer(client, "c1", time_zone="Europe/Berlin")
    await put_schedule(client, "dense", customer_id="c1", cron="*/5 * * * *")
    assert len(await occurrence_rows(container.engine)) == OCCURRENCES_PER_PASS
    horizon = clock.now + timedelta(days=7)
    passes = 0
    while True:
        written = await materialize_schedules(
            container.engine, now=clock.now, horizon_end=horizon, out_of_time=lambda: True
        )
        if not written:
            break
        passes += 1
        assert written <= OCCURRENCES_PER_PASS
    rows = await occurrence_rows(container.engine)
    assert passes == 4  # 500 at PUT, then 500 + 500 + 500 + 16
    assert len(rows) == 7 * 24 * 12 == len({row["id"] for row in rows})
    steps = {b["due_at"] - a["due_at"] for a, b in itertools.pairwise(rows)}
    assert steps == {timedelta(minutes=5)}
    assert rows[-1]["due_at"] <= horizon < rows[-1]["due_at"] + timedelta(minutes=5)


async def test_a_sweep_with_time_left_finishes_every_schedule(client, container, clock):
    """Without a time limit one call keeps going until every schedule reaches the horizon."""
    await put_customer(client, "c1", time_zone="UTC")
    for number in range(3):
        await put_schedule(client, f"dense-{number}", customer_id="c1", cron="*/5 * * * *")
    horizon = clock.now + timedelta(days=7)
    written = await materialize_schedules(
        container.engine, now=clock.now, horizon_end=horizon, batch_size=2
    )
    assert written == 3 * (7 * 24 * 12 - OCCURRENCES_PER_PASS)
    assert len(await occurrence_rows(container.engine)) == 3 * 7 * 24 * 12


async def test_sweeps_skip_a_schedule_until_its_next_occurrence_nears_the_horizon(
    client, container, clock
):
    """A weekly schedule is revisited once the horizon is a day from its next occurrence."""
    await put_customer(client, "c1", time_zone="Europe/Berlin")
    created = await put_schedule(client, "weekly", customer_id="c1", cron="0 9 * * 1")
    # Monday 2026-08-24 09:00 Berlin is 07:00 UTC; 26 hours before it:
    revisit = datetime(2026, 8, 23, 5, tzinfo=UTC)
    assert datetime.fromisoformat(created["materialized_through"]) == revisit
    clock.set(revisit - timedelta(days=7, minutes=1))
    await sweep(client)
    assert await visit_cursor(client) == revisit  # not visited
    clock.set(revisit - timedelta(days=7) + timedelta(hours=1))
    await sweep(client)
    assert await visit_cursor(client) == clock.now + timedelta(days=7)  # visited, then each sweep
    clock.set(datetime(2026, 8, 17, 7, tzinfo=UTC))
    await sweep(client)
    assert [row["id"] for row in await occurrence_rows(container.engine)] == [
        "weekly:2026-08-17T09:00",
        "weekly:2026-08-24T09:00",
    ]


async def visit_cursor(client) -> datetime:
    response = await client.get("/v1/schedules/weekly", headers=API)
    return datetime.fromisoformat(response.json()["materialized_through"])
