"""Recurrence work is bounded: hostile schedules are refused or isolated, never a frozen loop.

Defects: a schedule starting in year 1 stopped every sweep for every customer once its
customer moved zone (OverflowError); FREQ=HOURLY from year 1 held the event loop for 64 s,
a never-matching hourly rule for 8.6 s. The loop is measured in CPU time of its thread
(tests/support/loop_blocking.py): no request or sweep step may hold it ~100 ms.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from app.db.schedule_tables import schedules
from tests.support.dead_letters import ADMIN
from tests.support.flow import API, put_customer, put_reminder, scrape, sweep
from tests.support.loop_blocking import loop_blocking
from tests.support.schedules import put_schedule

pytestmark = pytest.mark.anyio

LOOP_BUDGET_SECONDS = 0.1
DAILY = {"customer_id": "c1", "rrule": "FREQ=DAILY", "local_time": "09:00"}


@pytest.fixture
async def customers(client):
    await put_customer(client, "c1")
    await put_customer(client, "c2")


def fields(response) -> list[str]:
    return [item["field"] for item in response.json()["fields"]]


async def test_a_start_before_the_sane_bound_is_422_naming_starts_at(client, customers):
    """``starts_at`` in year 1 (the poison schedule) is refused, not stored."""
    body = {**DAILY, "kind": "weekly_digest", "channels": ["email"]}
    body["starts_at"] = "0001-01-01T00:00:00Z"
    response = await client.put("/v1/schedules/poison", json=body, headers=API)
    assert response.status_code == 422, response.text
    assert "starts_at" in fields(response)


@pytest.mark.parametrize(
    "rrule", ["FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30", "FREQ=DAILY;INTERVAL=7;BYDAY=TU"]
)
async def test_a_rule_that_never_occurs_is_422_without_holding_the_loop(client, customers, rrule):
    """No occurrence within the look-ahead: 422 naming rrule, the loop free throughout."""
    body = {**DAILY, "rrule": rrule, "kind": "weekly_digest", "channels": ["email"]}
    body["starts_at"] = "2026-08-10T00:00:00Z"  # a Monday: every 7th day is never a Tuesday
    async with loop_blocking() as blocking:
        response = await client.put("/v1/schedules/never", json=body, headers=API)
    assert response.status_code == 422, response.text
    assert "rrule" in fields(response)
    assert blocking.longest < LOOP_BUDGET_SECONDS


async def test_an_hourly_schedule_from_long_ago_never_holds_the_loop(client, clock, customers):
    """FREQ=HOURLY from 2000: the PUT and the sweeps walk the horizon, not 26 years."""
    async with loop_blocking() as blocking:
        await put_schedule(
            client,
            "hourly",
            expect=201,
            customer_id="c1",
            rrule="FREQ=HOURLY",
            local_time="09:00",
            starts_at=datetime(2000, 1, 1, tzinfo=UTC),
        )
        clock.advance(hours=1)
        report = await sweep(client)
    assert blocking.longest < LOOP_BUDGET_SECONDS
    assert report["enqueued"] == 7 * 24 + 1  # 10:00 now to 10:00 in seven days, hourly
    shown = (await client.get("/v1/schedules/hourly", headers=API)).json()
    assert shown["upcoming"][0]["id"] == "hourly:2026-08-10T10:00"


async def test_a_schedule_that_cannot_be_computed_is_marked_broken_and_the_sweep_goes_on(
    client, clock, container, customers
):
    """The poison schedule (stored before the bound) no longer stops other customers."""
    await put_schedule(client, "poison", expect=201, **DAILY)
    async with container.engine.begin() as conn:  # as stored by an earlier release
        await conn.execute(
            update(schedules)
            .where(schedules.c.id == "poison")
            .values(starts_at=datetime(1, 1, 1, tzinfo=UTC))
        )
    await put_customer(client, "c1", time_zone="America/New_York")
    await put_reminder(client, "other", customer_id="c2", due_at=clock(), channels=("email",))
    clock.advance(days=1)

    report = await sweep(client)

    assert report["enqueued"] >= 1  # the other customer's reminder went out
    shown = (await client.get("/v1/schedules/poison", headers=API)).json()
    assert shown["broken_at"] is not None
    assert "OverflowError" in shown["broken_error"]
    metrics = await scrape(client)
    assert "reminders_schedules_broken 1.0" in metrics
    login = await client.post("/admin/login", data={"token": ADMIN["Authorization"][7:]})
    cookie = {"Cookie": login.headers["set-cookie"].split(";", 1)[0]}
    page = (await client.get("/admin", headers=cookie)).text
    assert "poison" in page.split('id="broken-schedules"', 1)[1]

    clock.advance(days=1)
    await sweep(client)  # skipped, not retried on every sweep
    again = await put_schedule(
        client, "poison", expect=200, **DAILY, starts_at=datetime(2026, 8, 1, tzinfo=UTC)
    )
    assert again["broken_at"] is None and again["broken_error"] is None
    assert again["upcoming"], "a PUT plans the repaired schedule again"
