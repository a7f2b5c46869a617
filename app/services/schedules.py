"""Recurring schedules: the API's use cases and the sweep's materialization.

A schedule generates ordinary ``reminders`` rows, one per occurrence, with the
deterministic id ``{schedule_id}:{local date-time}`` (the occurrence's nominal wall-clock
time in the schedule's zone, e.g. ``digest-42:2026-08-17T09:00``). Every write is
insert-if-absent, so re-runs, overlapping sweeps, a crash between two statements or a
catch-up after a long pause can neither duplicate nor skip an occurrence; the cursors
(``materialized_through``, the instant reached, and ``materialized_local``, the local
wall-clock time a pass resumes after) only save work.

- **Materialization**: each sweep creates the occurrences whose instant falls inside the
  queue's delay horizon (``now + max_delay``), bounded per schedule and per sweep.
  Occurrences missed while the sweep was not running are created late and go out at once
  (the receiver's usefulness rule may then drop them as ``expired``).
- **Re-plan**: a change of recurrence, time, zone, bounds, channels or customer withdraws
  (cancels) the unsent occurrences due in the future and plans again from now. An
  occurrence id present in both plans is revived with a bumped ``schedule_version``, so a
  message already queued for it is dropped as ``stale``; ids no longer planned stay
  cancelled (``cancelled`` at delivery). Sent occurrences are never touched.
- **Pause / delete** withdraw every unsent occurrence; resume (or a PUT of a deleted
  schedule) plans again from now, reviving withdrawn ids. Occurrences that fell in the
  pause are not created. An occurrence cancelled by hand through the reminders API stays
  cancelled unless a later withdrawal covered it.
- **Time zone**: ``time_zone`` null means the customer's zone *at materialization*; a
  customer who moves changes only occurrences not materialized yet (those inside the
  horizon keep their instant). Passes resume after the last *local* time handled, so a
  move neither skips nor repeats an occurrence; one whose new instant has already passed
  goes out at once. Quiet hours are read the same way (at materialization).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import customers_repo, schedules_repo
from app.db.ledger import repo as ledger_repo
from app.db.schedule_tables import ScheduleState
from app.domain.errors import Conflict, InvalidInput, NotFound, ReminderRelayError
from app.domain.recurrence import (
    KEY_FORMAT,
    Occurrence,
    QuietHours,
    Recurrence,
    occurrences_between,
    parse_local_time,
    parse_recurrence,
    parse_zone,
    wall_minute,
)

log = logging.getLogger("reminders.schedules")

# A change to any of these is a new plan: unsent occurrences are withdrawn and re-planned.
PLAN_FIELDS = frozenset(
    {"customer_id", "channels", "rrule", "cron", "local_time", "time_zone", "offset_days",
     "starts_at", "ends_at"}
)  # fmt: skip
# Applied in place to unsent occurrences: rendering reads them at send time.
CONTENT_FIELDS = ("kind", "data")
OCCURRENCES_PER_PASS = 500
SCHEDULES_PER_BATCH = 100
UPCOMING_SHOWN = 20
# Quiet hours can push an occurrence up to a day later; a re-plan looks back this far so
# an occurrence whose instant passed but whose (moved) due time has not is planned again.
_REPLAN_LOOKBACK = timedelta(days=1, hours=1)
# The widest gap between two UTC offsets (-12:00 to +14:00): the most a customer moving
# zone can pull an occurrence forward.
_ZONE_SLACK = timedelta(hours=26)
# How far ahead the next occurrence is looked for when deciding the next visit.
_LOOKAHEAD = timedelta(days=400)


@dataclass(frozen=True, slots=True)
class ScheduleUpsert:
    """The schedule after a PUT, and whether the PUT created it."""

    schedule: dict[str, Any]
    created: bool


def occurrence_id(schedule_id: str, occurrence: Occurrence) -> str:
    """The deterministic reminder id of one occurrence."""
    return f"{schedule_id}:{occurrence.key}"


def validate_schedule(values: dict[str, Any]) -> dict[str, Any]:
    """Check recurrence, time and zone (InvalidInput naming the field); normalized values."""
    recurrence = parse_recurrence(
        rrule_text=values.get("rrule"),
        cron=values.get("cron"),
        local_time=values.get("local_time"),
        offset_days=values.get("offset_days", 0),
    )
    if values.get("time_zone") is not None:
        parse_zone(values["time_zone"])
    starts_at, ends_at = values.get("starts_at"), values.get("ends_at")
    if starts_at is not None and ends_at is not None and ends_at <= starts_at:
        raise InvalidInput("ends_at", "must be after starts_at")
    return values | {"rrule": recurrence.rrule, "cron": recurrence.cron}


# --- the API's use cases --------------------------------------------------------------


async def put_schedule(
    conn: AsyncConnection,
    schedule_id: str,
    values: dict[str, Any],
    *,
    now: datetime,
    horizon_end: datetime,
) -> ScheduleUpsert:
    """Idempotent upsert; a new plan withdraws and re-plans unsent occurrences from now."""
    values = validate_schedule(values)
    if await customers_repo.get_customer(conn, values["customer_id"]) is None:
        raise InvalidInput("customer_id", f"no customer {values['customer_id']!r}")
    current = await schedules_repo.lock_schedule(conn, schedule_id)
    if current is None:
        initial = values | {"materialized_through": now}
        if await schedules_repo.insert_schedule(conn, schedule_id, initial, now=now):
            await _replan(conn, schedule_id, now=now, horizon_end=horizon_end, withdraw=False)
            return ScheduleUpsert(await get_schedule(conn, schedule_id), created=True)
        current = await schedules_repo.lock_schedule(conn, schedule_id)  # lost a create race
        assert current is not None
    changes = {name: value for name, value in values.items() if current[name] != value}
    revive = current["state"] == ScheduleState.DELETED
    if not changes and not revive:
        return ScheduleUpsert(await get_schedule(conn, schedule_id), created=False)
    if revive:
        changes["state"] = ScheduleState.ACTIVE.value
    await schedules_repo.update_schedule(conn, schedule_id, changes, now=now)
    content = {name: changes[name] for name in CONTENT_FIELDS if name in changes}
    if content:
        await schedules_repo.update_open_content(conn, schedule_id, content, now=now)
    active = revive or current["state"] == ScheduleState.ACTIVE
    if active and (revive or PLAN_FIELDS & changes.keys()):
        await _replan(conn, schedule_id, now=now, horizon_end=horizon_end, withdraw=True)
    return ScheduleUpsert(await get_schedule(conn, schedule_id), created=False)


async def get_schedule(conn: AsyncConnection, schedule_id: str) -> dict[str, Any]:
    """A schedule with its next unsent occurrences, or NotFound."""
    schedule = await schedules_repo.get_schedule(conn, schedule_id)
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    schedule["upcoming"] = await schedules_repo.list_open_occurrences(
        conn, schedule_id, limit=UPCOMING_SHOWN
    )
    return schedule


async def delete_schedule(
    conn: AsyncConnection, schedule_id: str, *, now: datetime
) -> dict[str, Any]:
    """Stop the schedule and cancel every unsent occurrence (queued ones drop at delivery)."""
    return await _stop(conn, schedule_id, ScheduleState.DELETED, now=now)


async def pause_schedule(conn: AsyncConnection, schedule_id: str, *, now: datetime) -> dict:
    """Stop producing occurrences and withdraw the unsent ones until resumed."""
    return await _stop(conn, schedule_id, ScheduleState.PAUSED, now=now)


async def resume_schedule(
    conn: AsyncConnection, schedule_id: str, *, now: datetime, horizon_end: datetime
) -> dict[str, Any]:
    """Produce occurrences again from now on (none for the paused stretch)."""
    current = await _locked(conn, schedule_id)
    if current["state"] == ScheduleState.DELETED:
        raise Conflict(f"schedule {schedule_id!r} is deleted; PUT it again to bring it back")
    if current["state"] == ScheduleState.PAUSED:
        await schedules_repo.update_schedule(
            conn, schedule_id, {"state": ScheduleState.ACTIVE.value}, now=now
        )
        await _replan(conn, schedule_id, now=now, horizon_end=horizon_end, withdraw=False)
    return await get_schedule(conn, schedule_id)


async def _locked(conn: AsyncConnection, schedule_id: str) -> dict[str, Any]:
    current = await schedules_repo.lock_schedule(conn, schedule_id)
    if current is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return current


async def _stop(
    conn: AsyncConnection, schedule_id: str, state: ScheduleState, *, now: datetime
) -> dict[str, Any]:
    current = await _locked(conn, schedule_id)
    if current["state"] == ScheduleState.DELETED and state == ScheduleState.PAUSED:
        raise Conflict(f"schedule {schedule_id!r} is deleted")
    if current["state"] != state:
        await schedules_repo.update_schedule(conn, schedule_id, {"state": state.value}, now=now)
        await schedules_repo.withdraw_occurrences(conn, schedule_id, now=now, due_after=None)
    return await get_schedule(conn, schedule_id)


async def _replan(
    conn: AsyncConnection,
    schedule_id: str,
    *,
    now: datetime,
    horizon_end: datetime,
    withdraw: bool,
) -> None:
    # Same transaction as the change: no delivery can see the gap between withdraw and
    # revive, so a queued message of a re-planned occurrence arrives as "stale".
    if withdraw:
        await schedules_repo.withdraw_occurrences(conn, schedule_id, now=now, due_after=now)
    schedule = await schedules_repo.lock_schedule(conn, schedule_id)
    assert schedule is not None
    lookback = _REPLAN_LOOKBACK if _quiet_hours(schedule) else timedelta(0)
    start = wall_minute(now - lookback, _zones(schedule)[0])
    await materialize_one(
        conn, schedule, after_local=start, until=horizon_end, due_after=now, now=now
    )


# --- materialization --------------------------------------------------------------------


def _recurrence(schedule: dict[str, Any]) -> Recurrence:
    return parse_recurrence(
        rrule_text=schedule["rrule"],
        cron=schedule["cron"],
        local_time=schedule["local_time"],
        offset_days=schedule["offset_days"],
    )


def _quiet_hours(schedule: dict[str, Any]) -> QuietHours | None:
    start, end = schedule.get("quiet_hours_start"), schedule.get("quiet_hours_end")
    if not start or not end:
        return None
    window = QuietHours(parse_local_time(start), parse_local_time(end))
    return window if window.start != window.end else None


def _zones(schedule: dict[str, Any]) -> tuple[ZoneInfo, ZoneInfo]:
    customer_zone = parse_zone(schedule["customer_time_zone"])
    zone = parse_zone(schedule["time_zone"]) if schedule["time_zone"] else customer_zone
    return zone, customer_zone


def plan(
    schedule: dict[str, Any], *, after_local: datetime, until: datetime, limit: int | None
) -> list[Occurrence]:
    """The occurrences after a local time, up to an instant (a row with customer fields)."""
    zone, customer_zone = _zones(schedule)
    return occurrences_between(
        _recurrence(schedule),
        zone=zone,
        anchor=schedule["starts_at"] or schedule["created_at"],
        after_local=after_local,
        until=until,
        starts_at=schedule["starts_at"],
        ends_at=schedule["ends_at"],
        quiet=_quiet_hours(schedule),
        quiet_zone=customer_zone,
        limit=limit,
    )


async def materialize_one(
    conn: AsyncConnection,
    schedule: dict[str, Any],
    *,
    after_local: datetime,
    until: datetime,
    now: datetime,
    due_after: datetime | None = None,
) -> tuple[int, datetime]:
    """Create (or revive) occurrences after ``after_local`` up to ``until``; (how many, cursor).

    The cursor is when the schedule needs a visit again: the last occurrence's instant when
    the pass was cut at ``OCCURRENCES_PER_PASS``, else a day before its next occurrence.
    """
    found = plan(schedule, after_local=after_local, until=until, limit=OCCURRENCES_PER_PASS)
    if len(found) >= OCCURRENCES_PER_PASS:
        cursor, local = found[-1].at, found[-1].local
    else:
        local = max(after_local, wall_minute(until, _zones(schedule)[0]))
        cursor = _next_visit(schedule, local, until)
    wanted = [item for item in found if due_after is None or item.due_at > due_after]
    rows = [_occurrence_row(schedule, item) for item in wanted]
    revived = await schedules_repo.revivable_occurrences(
        conn, schedule["id"], [row["id"] for row in rows], withdrawn_at=schedule["withdrawn_at"]
    )
    await schedules_repo.revive_occurrences(
        conn, [row for row in rows if row["id"] in revived], now=now
    )
    for reminder_id in sorted(revived):
        await ledger_repo.reset_open_sends(conn, [reminder_id], now=now)
    fresh = [row for row in rows if row["id"] not in revived]
    created = await schedules_repo.insert_occurrences(conn, fresh, now=now)
    await schedules_repo.set_materialized(
        conn, schedule["id"], through=cursor, local=local.strftime(KEY_FORMAT)
    )
    return created + len(revived), cursor


def _next_visit(schedule: dict[str, Any], local: datetime, until: datetime) -> datetime:
    # Sweeps skip the schedule until the horizon comes within a day of its next occurrence
    # (more than any zone move can pull it forward), so a weekly schedule costs one visit
    # a week, not one per sweep.
    upcoming = plan(schedule, after_local=local, until=until + _LOOKAHEAD, limit=1)
    revisit = upcoming[0].at if upcoming else until + _LOOKAHEAD
    return max(until, revisit - _ZONE_SLACK)


def _occurrence_row(schedule: dict[str, Any], occurrence: Occurrence) -> dict[str, Any]:
    return {
        "id": occurrence_id(schedule["id"], occurrence),
        "schedule_id": schedule["id"],
        "customer_id": schedule["customer_id"],
        "kind": schedule["kind"],
        "due_at": occurrence.due_at,
        "expires_at": None,
        "channels": list(schedule["channels"]),
        "data": dict(schedule["data"] or {}),
    }


async def materialize_schedules(
    engine: AsyncEngine,
    *,
    now: datetime,
    horizon_end: datetime,
    out_of_time: Callable[[], bool] = lambda: False,
    batch_size: int = SCHEDULES_PER_BATCH,
) -> int:
    """Materialize active schedules up to the horizon in bounded batches; occurrences written.

    One transaction per batch. ``out_of_time`` is asked before every batch but the first.
    """
    written = 0
    while True:
        async with engine.begin() as conn:
            batch = await schedules_repo.claim_schedules_to_materialize(
                conn, horizon_end=horizon_end, limit=batch_size
            )
            unfinished = 0
            for schedule in batch:
                count, cursor = await _materialize_claimed(conn, schedule, now, horizon_end)
                written += count
                unfinished += cursor < horizon_end
        if (len(batch) < batch_size and not unfinished) or out_of_time():
            return written


async def _materialize_claimed(
    conn: AsyncConnection, schedule: dict[str, Any], now: datetime, horizon_end: datetime
) -> tuple[int, datetime]:
    try:
        start = _resume_point(schedule)
        return await materialize_one(conn, schedule, after_local=start, until=horizon_end, now=now)
    except ReminderRelayError as error:
        # Validated on input, so only a vanished tzdata zone gets here. Skip the window
        # rather than block every other schedule behind this one; the log says which.
        log.error("schedule %s cannot be materialized: %s", schedule["id"], error)
        await schedules_repo.set_materialized(
            conn, schedule["id"], through=horizon_end, local=schedule["materialized_local"]
        )
        return 0, horizon_end


def _resume_point(schedule: dict[str, Any]) -> datetime:
    if schedule["materialized_local"]:
        return datetime.strptime(schedule["materialized_local"], KEY_FORMAT)
    return wall_minute(schedule["created_at"], _zones(schedule)[0])
