"""A simulated year of recurring schedules through the whole flow, and a 10-day sweep outage.

Every step goes through HTTP: schedules are registered with PUT, the cron sweep runs
``POST /cron/sweep`` (materialize, then publish), the in-memory queue pushes each message
to ``/push/reminders`` at its visible time and the scripted provider records each send.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.support.flow import put_customer
from tests.support.schedules import (
    TimedQueue,
    ledger_by_reminder,
    occurrence_rows,
    provider_sends,
    put_schedule,
)

pytestmark = pytest.mark.anyio

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
KOLKATA = ZoneInfo("Asia/Kolkata")
YEAR_START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2027, 1, 1, tzinfo=UTC)

YEAR_SCHEDULES = {
    "weekly": {"customer_id": "c-berlin", "cron": "0 9 * * 1"},
    "invoice": {
        "customer_id": "c-berlin",
        "kind": "renewal",
        "rrule": "FREQ=MONTHLY;BYMONTHDAY=1",
        "local_time": "08:00",
        "time_zone": "America/New_York",
    },
    "renewal": {
        "customer_id": "c-berlin",
        "kind": "renewal",
        "rrule": "FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=1",
        "local_time": "10:00",
        "offset_days": -3,
    },
    "howe": {
        "customer_id": "c-howe",
        "rrule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1,2;BYMINUTE=15,45",
        "local_time": "00:00",
    },
    "quiet": {
        "customer_id": "c-quiet",
        "rrule": "FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=6,12",
        "local_time": "06:30",
    },
}


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def days_of_2026(*weekdays: int) -> list[date]:
    first = date(2026, 1, 1)
    every = (first + timedelta(days=n) for n in range(365))
    return [day for day in every if day.weekday() in weekdays]


def at(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """An unambiguous local time as UTC (the DST edge cases are written out by hand)."""
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone).astimezone(UTC)


def key(day: date, hour: int, minute: int) -> str:
    return f"{day.isoformat()}T{hour:02d}:{minute:02d}"


def expected_year() -> dict[str, datetime]:
    """Every occurrence of 2026, worked out independently of the code under test."""
    expected: dict[str, datetime] = {}
    for day in days_of_2026(0):  # Monday 09:00 Berlin
        expected[f"weekly:{key(day, 9, 0)}"] = at(day, 9, 0, BERLIN)
    for month in range(1, 13):  # the 1st, 08:00 New York
        day = date(2026, month, 1)
        expected[f"invoice:{key(day, 8, 0)}"] = at(day, 8, 0, NEW_YORK)
    # Three days before 1 March: 26 February 10:00 Berlin (CET).
    expected["renewal:2026-02-26T10:00"] = utc(2026, 2, 26, 9)
    for day in days_of_2026(6):  # Sundays 01:15, 01:45, 02:15, 02:45 on Lord Howe
        for hour, minute in ((1, 15), (1, 45), (2, 15), (2, 45)):
            expected[f"howe:{key(day, hour, minute)}"] = at(day, hour, minute, LORD_HOWE)
    # 5 April: 01:45 happens twice (+11:00, then +10:30): the first one.
    expected["howe:2026-04-05T01:45"] = utc(2026, 4, 4, 14, 45)
    # 4 October: 02:15 does not exist (02:00 jumps to 02:30 +11:00): moved to the jump.
    expected["howe:2026-10-04T02:15"] = utc(2026, 10, 3, 15, 30)
    for day in days_of_2026(0, 3):  # Monday and Thursday in Kolkata, quiet 22:00-07:00
        expected[f"quiet:{key(day, 6, 30)}"] = at(day, 7, 0, KOLKATA)  # moved to 07:00
        expected[f"quiet:{key(day, 12, 30)}"] = at(day, 12, 30, KOLKATA)
    return expected


async def register_year(client) -> None:
    await put_customer(client, "c-berlin", time_zone="Europe/Berlin")
    await put_customer(client, "c-howe", time_zone="Australia/Lord_Howe")
    await put_customer(
        client, "c-quiet", time_zone="Asia/Kolkata", quiet_hours_start="22:00",
        quiet_hours_end="07:00",
    )  # fmt: skip
    for schedule_id, body in YEAR_SCHEDULES.items():
        await put_schedule(client, schedule_id, expect=201, **body)


async def test_a_simulated_year_sends_every_occurrence_once_at_its_instant(
    client, clock, publisher, provider, container
):
    """Daily sweeps for a year: each expected occurrence exists once, due at the right UTC
    instant (DST in Berlin, New York and Lord Howe, quiet hours in Kolkata), sent once."""
    # Retention off: the daily sweeps would delete occurrences done more than 90 days
    # earlier, and this test counts every occurrence of the year.
    container.settings = container.settings.model_copy(update={"retention_days": 0})
    clock.set(YEAR_START)
    await register_year(client)
    queue = TimedQueue(client, publisher, clock)
    await queue.sweep_at(YEAR_START)
    moment = YEAR_START
    while moment < YEAR_END:
        moment += timedelta(days=1)
        await queue.sweep_at(min(moment, YEAR_END))
    await queue.run_until(YEAR_END)

    expected = expected_year()
    rows = [row for row in await occurrence_rows(container.engine) if row["due_at"] < YEAR_END]
    assert {row["id"]: row["due_at"] for row in rows} == expected
    assert len(rows) == len(expected) == 52 + 12 + 1 + 4 * 52 + 2 * 2 * 52 + 2
    assert {row["state"] for row in rows} == {"done"}
    sends = provider_sends(provider)
    assert {reminder_id: sends[reminder_id] for reminder_id in expected} == dict.fromkeys(
        expected, 1
    )
    assert sum(sends.values()) == len(expected)
    ledger = await ledger_by_reminder(container.engine)
    assert {reminder_id: [(r["outcome"], r["sent_at"]) for r in ledger[reminder_id]]
            for reminder_id in expected} == {
        reminder_id: [("sent", due_at)] for reminder_id, due_at in expected.items()
    }  # fmt: skip
    assert set(queue.outcomes()) == {"sent"}


async def test_ten_days_without_sweeps_are_caught_up_without_gaps_or_duplicates(
    client, clock, publisher, provider, container
):
    """The cron stops for 10 days: the missed occurrences are created once when it resumes;
    those past the 24 h usefulness grace are recorded as expired, the rest are sent once."""
    start = utc(2026, 8, 10, 6)
    clock.set(start)
    await put_customer(client, "c-berlin", time_zone="Europe/Berlin")
    await put_schedule(
        client, "daily", customer_id="c-berlin", rrule="FREQ=DAILY", local_time="09:00"
    )
    await put_schedule(client, "weekly", customer_id="c-berlin", cron="0 9 * * 1")
    resume, end = start + timedelta(days=10), start + timedelta(days=20)
    queue = TimedQueue(client, publisher, clock)
    await queue.sweep_at(start)
    await queue.run_until(resume)  # the queue keeps pushing; nobody sweeps
    report = await queue.sweep_at(resume)
    assert report["enqueued"] == 3 + 1 + 7 + 1  # overdue daily + weekly, then the horizon
    for day in range(1, 11):
        await queue.sweep_at(resume + timedelta(days=day))
    await queue.run_until(end)

    days = [date(2026, 8, 10) + timedelta(days=n) for n in range(20)]
    expected = {f"daily:{key(day, 9, 0)}": at(day, 9, 0, BERLIN) for day in days}
    expected |= {
        f"weekly:{key(day, 9, 0)}": at(day, 9, 0, BERLIN) for day in days if day.weekday() == 0
    }
    rows = [row for row in await occurrence_rows(container.engine) if row["due_at"] < end]
    assert {row["id"]: row["due_at"] for row in rows} == expected
    late = {"daily:2026-08-17T09:00", "daily:2026-08-18T09:00", "weekly:2026-08-17T09:00"}
    ledger = await ledger_by_reminder(container.engine)
    outcomes = {
        reminder_id: [r["outcome"] for r in ledger[reminder_id]] for reminder_id in expected
    }
    assert outcomes == {
        reminder_id: ["expired" if reminder_id in late else "sent"] for reminder_id in expected
    }
    sends = provider_sends(provider)
    assert sends == {reminder_id: 1 for reminder_id in expected if reminder_id not in late}
    # Within the grace, a missed occurrence goes out as soon as the sweep is back.
    [caught_up] = ledger["daily:2026-08-19T09:00"]
    assert caught_up["sent_at"] == resume
