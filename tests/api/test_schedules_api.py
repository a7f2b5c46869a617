"""The schedules API: register, validate, materialize, re-plan, pause, resume, delete."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from app.db.schedule_tables import schedules
from app.services.materialize import materialize_schedules
from tests.support.flow import API, put_customer, sweep
from tests.support.schedules import (
    TimedQueue,
    ledger_by_reminder,
    occurrence_rows,
    provider_sends,
    put_schedule,
    schedule_action,
)

# Module-level anyio mark: parametrized async tests keep their parameters (see conftest).
pytestmark = pytest.mark.anyio

WEEKLY = {"customer_id": "cust_1", "cron": "0 9 * * 1"}  # Monday 09:00, customer's zone
BERLIN_CUSTOMER = {"time_zone": "Europe/Berlin"}


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.fixture
async def berlin_customer(client):
    await put_customer(client, "cust_1", **BERLIN_CUSTOMER)


async def test_put_creates_a_schedule_and_its_occurrences_inside_the_horizon(
    client, clock, berlin_customer
):
    """A new weekly schedule materializes at once the Mondays within the 7-day horizon."""
    created = await put_schedule(client, "digest-1", expect=201, **WEEKLY)
    assert created["state"] == "active"
    assert created["version"] == 1
    # Now is Monday 2026-08-10 09:00 UTC (11:00 Berlin): today's 09:00 is past.
    assert [item["id"] for item in created["upcoming"]] == ["digest-1:2026-08-17T09:00"]
    assert created["upcoming"][0]["due_at"].startswith("2026-08-17T07:00:00")
    again = await put_schedule(client, "digest-1", expect=200, **WEEKLY)
    assert again["version"] == 1
    assert len(await occurrence_rows(client._transport.app.state.container.engine)) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rrule": "FREQ=WEEKLY;BYDAY=XX", "local_time": "09:00"}, "rrule"),
        ({"cron": "0 25 * * *"}, "cron"),
        ({"rrule": "FREQ=WEEKLY", "local_time": "9:00"}, "local_time"),
        ({"rrule": "FREQ=WEEKLY"}, "local_time"),
        ({"cron": "0 9 * * 1", "time_zone": "Europe/Atlantis"}, "time_zone"),
        ({"cron": "0 9 * * 1", "customer_id": "nobody"}, "customer_id"),
        (
            {
                "cron": "0 9 * * 1",
                "starts_at": "2027-01-01T00:00:00Z",
                "ends_at": "2026-01-01T00:00:00Z",
            },
            "ends_at",
        ),
        ({"cron": "0 9 * * 1", "kind": "no_template_for_this"}, "kind"),
        ({"cron": "0 9 * * 1", "channels": []}, "channels"),
    ],
)
async def test_invalid_schedules_get_422_naming_the_field(client, berlin_customer, body, field):
    """Each invalid input is refused with the offending field named."""
    payload = {"customer_id": "cust_1", "kind": "weekly_digest", "channels": ["email"], **body}
    response = await client.put("/v1/schedules/bad-1", json=payload, headers=API)
    assert response.status_code == 422, response.text
    assert field in [item["field"] for item in response.json()["fields"]]


async def test_customer_quiet_hours_are_validated_and_returned(client):
    """Quiet hours need both ends in HH:MM; GET returns them."""
    bad = await client.put("/v1/customers/q1", json={"quiet_hours_start": "22:00"}, headers=API)
    assert bad.status_code == 422
    assert bad.json()["fields"][0]["field"] == "quiet_hours_end"
    wrong = await client.put(
        "/v1/customers/q1",
        json={"quiet_hours_start": "25:00", "quiet_hours_end": "07:00"},
        headers=API,
    )
    assert wrong.json()["fields"][0]["field"] == "quiet_hours_start"
    customer = await put_customer(client, "q1", quiet_hours_start="22:00", quiet_hours_end="07:00")
    assert (customer["quiet_hours_start"], customer["quiet_hours_end"]) == ("22:00", "07:00")


async def test_quiet_hours_move_an_occurrence_to_the_window_end(client, container):
    """06:30 inside 22:00-07:00 (Kolkata) is due at 07:00 local; its id keeps 06:30."""
    await put_customer(
        client, "cust_q", time_zone="Asia/Kolkata", quiet_hours_start="22:00",
        quiet_hours_end="07:00",
    )  # fmt: skip
    body = {"customer_id": "cust_q", "rrule": "FREQ=DAILY;COUNT=3", "local_time": "06:30"}
    await put_schedule(client, "early", starts_at=utc(2026, 8, 11), **body)
    rows = await occurrence_rows(container.engine, "early")
    assert [(row["id"], row["due_at"]) for row in rows] == [
        ("early:2026-08-11T06:30", utc(2026, 8, 11, 1, 30)),
        ("early:2026-08-12T06:30", utc(2026, 8, 12, 1, 30)),
        ("early:2026-08-13T06:30", utc(2026, 8, 13, 1, 30)),
    ]


async def test_rerunning_materialization_never_duplicates(client, container, berlin_customer):
    """Forgetting the cursor and running two materializations at once adds nothing."""
    await put_schedule(
        client, "digest-1", rrule="FREQ=DAILY", local_time="09:00", customer_id="cust_1"
    )
    before = await occurrence_rows(container.engine)
    assert len(before) == 7
    async with container.engine.begin() as conn:
        await conn.execute(update(schedules).values(materialized_through=None))
    horizon = container.clock() + timedelta(days=7)
    await asyncio.gather(
        materialize_schedules(container.engine, now=container.clock(), horizon_end=horizon),
        materialize_schedules(container.engine, now=container.clock(), horizon_end=horizon),
    )
    after = await occurrence_rows(container.engine)
    assert [(row["id"], row["schedule_version"]) for row in after] == [
        (row["id"], row["schedule_version"]) for row in before
    ]


async def test_changing_the_zone_replans_and_queued_messages_arrive_stale(
    client, clock, publisher, provider, container, berlin_customer
):
    """Same local time in a new zone: same id, version 2, the old message is dropped as stale."""
    queue = TimedQueue(client, publisher, clock)
    await put_schedule(client, "digest-1", **WEEKLY)
    await queue.sweep_at(clock.now)
    [old] = queue.publisher.messages
    assert old.payload["schedule_version"] == 1
    await put_schedule(client, "digest-1", time_zone="America/New_York", **WEEKLY)
    rows = await _occurrences_by_id(container)
    # It is 05:00 in New York: today's 09:00 is ahead now. Next Monday's moved past the
    # horizon, so it stays withdrawn until a sweep reaches it and revives it.
    assert rows == {
        "digest-1:2026-08-10T09:00": (1, "scheduled", utc(2026, 8, 10, 13)),
        "digest-1:2026-08-17T09:00": (1, "cancelled", utc(2026, 8, 17, 7)),
    }
    for day in range(1, 9):
        await queue.sweep_at(utc(2026, 8, 10, 9) + timedelta(days=day))
    assert (await _occurrences_by_id(container))["digest-1:2026-08-17T09:00"] == (
        2,
        "done",
        utc(2026, 8, 17, 13),
    )
    assert queue.outcomes() == {"stale": 1, "sent": 2}
    assert provider_sends(provider) == {
        "digest-1:2026-08-10T09:00": 1,
        "digest-1:2026-08-17T09:00": 1,
    }
    ledger = await ledger_by_reminder(container.engine)
    assert [record["sent_at"] for record in ledger["digest-1:2026-08-17T09:00"]] == [
        utc(2026, 8, 17, 13)
    ]


async def _occurrences_by_id(container) -> dict[str, tuple]:
    return {
        row["id"]: (row["schedule_version"], row["state"], row["due_at"])
        for row in await occurrence_rows(container.engine)
    }


async def test_changing_the_time_cancels_the_old_occurrence_and_plans_the_new(
    client, clock, publisher, provider, container, berlin_customer
):
    """09:00 → 10:00: the 09:00 occurrence is cancelled (dropped on arrival), 10:00 is sent."""
    queue = TimedQueue(client, publisher, clock)
    await put_schedule(client, "digest-1", **WEEKLY)
    await queue.sweep_at(clock.now)
    await put_schedule(client, "digest-1", customer_id="cust_1", cron="0 10 * * 1")
    states = {row["id"]: row["state"] for row in await occurrence_rows(container.engine)}
    assert states == {
        "digest-1:2026-08-17T09:00": "cancelled",
        "digest-1:2026-08-17T10:00": "scheduled",
    }
    await queue.sweep_at(clock.now)
    await queue.run_until(utc(2026, 8, 17, 12))
    assert queue.outcomes() == {"cancelled": 1, "sent": 1}
    assert provider_sends(provider) == {"digest-1:2026-08-17T10:00": 1}


async def test_a_data_change_applies_in_place_without_a_new_version(
    client, container, berlin_customer
):
    """Changing data updates unsent occurrences; schedule_version stays (rendered at send)."""
    await put_schedule(client, "digest-1", data={"n": 1}, **WEEKLY)
    changed = await put_schedule(client, "digest-1", data={"n": 2}, **WEEKLY)
    assert changed["version"] == 2
    [row] = await occurrence_rows(container.engine)
    assert (row["data"], row["schedule_version"]) == ({"n": 2}, 1)


async def test_delete_cancels_unsent_occurrences_and_stops_the_schedule(
    client, clock, publisher, provider, container, berlin_customer
):
    """After DELETE the queued message is dropped as cancelled and nothing new is created."""
    queue = TimedQueue(client, publisher, clock)
    await put_schedule(client, "digest-1", **WEEKLY)
    await queue.sweep_at(clock.now)
    deleted = await schedule_action(client, "digest-1", "delete")
    assert deleted["state"] == "deleted"
    assert deleted["upcoming"] == []
    for day in range(1, 30):
        await queue.sweep_at(utc(2026, 8, 10, 9) + timedelta(days=day))
    assert queue.outcomes() == {"cancelled": 1}
    assert provider.calls == []
    assert [row["state"] for row in await occurrence_rows(container.engine)] == ["cancelled"]


async def test_pause_withdraws_and_resume_revives_with_a_new_version(
    client, clock, publisher, provider, container, berlin_customer
):
    """Pause then resume before the occurrence: one send, the pre-pause message is stale."""
    queue = TimedQueue(client, publisher, clock)
    await put_schedule(client, "digest-1", **WEEKLY)
    await queue.sweep_at(clock.now)
    paused = await schedule_action(client, "digest-1", "pause")
    assert (paused["state"], paused["upcoming"]) == ("paused", [])
    clock.advance(days=1)
    resumed = await schedule_action(client, "digest-1", "resume")
    assert resumed["state"] == "active"
    assert [(o["id"], o["schedule_version"]) for o in resumed["upcoming"]] == [
        ("digest-1:2026-08-17T09:00", 2)
    ]
    for day in range(1, 9):
        await queue.sweep_at(utc(2026, 8, 11, 9) + timedelta(days=day))
    assert queue.outcomes() == {"stale": 1, "sent": 1}
    assert provider_sends(provider) == {"digest-1:2026-08-17T09:00": 1}


async def test_occurrences_of_a_paused_stretch_are_not_created(
    client, clock, publisher, container, berlin_customer
):
    """Paused for three weeks: the Mondays in between never exist."""
    queue = TimedQueue(client, publisher, clock)
    await put_schedule(client, "digest-1", **WEEKLY)
    await schedule_action(client, "digest-1", "pause")
    for day in range(1, 22):
        await queue.sweep_at(utc(2026, 8, 10, 9) + timedelta(days=day))
    await schedule_action(client, "digest-1", "resume")
    await sweep(client)
    ids = [
        row["id"] for row in await occurrence_rows(container.engine) if row["state"] != "cancelled"
    ]
    assert ids == ["digest-1:2026-09-07T09:00"]


async def test_a_hand_cancelled_occurrence_stays_cancelled(client, container, berlin_customer):
    """Skipping one occurrence through the reminders API survives later sweeps and edits."""
    await put_schedule(client, "digest-1", **WEEKLY)
    response = await client.delete("/v1/reminders/digest-1:2026-08-17T09:00", headers=API)
    assert response.status_code == 200
    await put_schedule(client, "digest-1", data={"n": 2}, **WEEKLY)
    await sweep(client)
    [row] = await occurrence_rows(container.engine)
    assert row["state"] == "cancelled"


async def test_pause_of_a_deleted_schedule_conflicts_and_put_revives_it(
    client, container, berlin_customer
):
    """A deleted schedule cannot be paused or resumed; PUT brings it back with its occurrences."""
    await put_schedule(client, "digest-1", **WEEKLY)
    await schedule_action(client, "digest-1", "delete")
    for action in ("pause", "resume"):
        response = await client.post(f"/v1/schedules/digest-1/{action}", headers=API)
        assert response.status_code == 409
    revived = await put_schedule(client, "digest-1", expect=200, **WEEKLY)
    assert revived["state"] == "active"
    assert [(o["id"], o["schedule_version"]) for o in revived["upcoming"]] == [
        ("digest-1:2026-08-17T09:00", 2)
    ]


async def test_unknown_schedules_are_404(client):
    """GET, DELETE, pause and resume of an unknown id answer 404."""
    assert (await client.get("/v1/schedules/nope", headers=API)).status_code == 404
    assert (await client.delete("/v1/schedules/nope", headers=API)).status_code == 404
    assert (await client.post("/v1/schedules/nope/pause", headers=API)).status_code == 404
    assert (await client.post("/v1/schedules/nope/resume", headers=API)).status_code == 404


async def test_schedules_require_the_api_token(client):
    """No bearer token, no schedules."""
    assert (await client.get("/v1/schedules/x")).status_code == 401


async def test_a_customer_moving_east_near_the_horizon_loses_no_occurrence(
    client, clock, publisher, provider, container
):
    """New York → Berlin just before the horizon reaches Monday 09:00: it is still sent once."""
    clock.set(utc(2026, 8, 10, 8))
    await put_customer(client, "cust_1", time_zone="America/New_York")
    await put_schedule(client, "digest-1", **WEEKLY)
    # Horizon: 2026-08-17 08:00 UTC. Monday 09:00 New York (13:00 UTC) is beyond it.
    assert [row["id"] for row in await occurrence_rows(container.engine)] == [
        "digest-1:2026-08-10T09:00"
    ]
    await put_customer(client, "cust_1", time_zone="Europe/Berlin")
    queue = TimedQueue(client, publisher, clock)
    for hours in range(1, 8 * 24, 6):
        await queue.sweep_at(utc(2026, 8, 10, 8) + timedelta(hours=hours))
    rows = {row["id"]: row["due_at"] for row in await occurrence_rows(container.engine)}
    assert rows["digest-1:2026-08-10T09:00"] == utc(2026, 8, 10, 13)  # kept its instant
    assert rows["digest-1:2026-08-17T09:00"] == utc(2026, 8, 17, 7)  # in Berlin now, not skipped
    assert provider_sends(provider) == {
        "digest-1:2026-08-10T09:00": 1,
        "digest-1:2026-08-17T09:00": 1,
    }
