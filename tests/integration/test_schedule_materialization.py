"""Materialization works in bounded passes that resume exactly where the last one stopped."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from app.services.schedules import OCCURRENCES_PER_PASS, materialize_schedules
from tests.support.flow import put_customer
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
