"""Recurring schedules: the API's use cases (materialization: ``app.services.materialize``).

A schedule generates ordinary ``reminders`` rows, one per occurrence, with the
deterministic id ``{schedule_id}:{local date-time}`` (the occurrence's nominal wall-clock
time in the schedule's zone, e.g. ``digest-42:2026-08-17T09:00``). Every write is
insert-if-absent, so re-runs, overlapping sweeps, a crash between two statements or a
catch-up after a long pause can neither duplicate nor skip an occurrence; the cursors
(``materialized_through``, the instant reached, and ``materialized_local``, the local
wall-clock time a pass resumes after) only save work.

- **Bounded**: a recurrence must show an occurrence within a look-ahead of its start, and
  every walk over it is bounded (``app.domain.rrules``); a schedule whose computation still
  fails in a sweep is marked broken and skipped (``app.services.materialize``). Any PUT of
  a broken schedule re-plans it and clears the mark.
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

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import customers_repo, schedules_repo
from app.db.schedule_tables import ScheduleState
from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.recurrence import check_occurs, parse_recurrence, parse_zone, wall_minute

from .materialize import compute_pass, quiet_hours, write_pass, zones

# A change to any of these is a new plan: unsent occurrences are withdrawn and re-planned.
PLAN_FIELDS = frozenset(
    {"customer_id", "channels", "rrule", "cron", "local_time", "time_zone", "offset_days",
     "starts_at", "ends_at"}
)  # fmt: skip
# Applied in place to unsent occurrences: rendering reads them at send time.
CONTENT_FIELDS = ("kind", "data")
UPCOMING_SHOWN = 20
# Quiet hours can push an occurrence up to a day later; a re-plan looks back this far so
# an occurrence whose instant passed but whose (moved) due time has not is planned again.
_REPLAN_LOOKBACK = timedelta(days=1, hours=1)
# Cleared by every PUT and resume: the schedule is planned again.
_NOT_BROKEN = {"broken_at": None, "broken_error": None}


@dataclass(frozen=True, slots=True)
class ScheduleUpsert:
    """The schedule after a PUT, and whether the PUT created it."""

    schedule: dict[str, Any]
    created: bool


def validate_schedule(
    values: dict[str, Any], *, customer_zone: str, created_at: datetime
) -> dict[str, Any]:
    """Check recurrence, time and zone (InvalidInput naming the field); normalized values.

    The recurrence must occur within a bounded look-ahead of where it starts (``starts_at``,
    else the schedule's creation), in the zone it will be computed in.
    """
    recurrence = parse_recurrence(
        rrule_text=values.get("rrule"),
        cron=values.get("cron"),
        local_time=values.get("local_time"),
        offset_days=values.get("offset_days", 0),
    )
    zone = parse_zone(values.get("time_zone") or customer_zone)
    starts_at, ends_at = values.get("starts_at"), values.get("ends_at")
    if starts_at is not None and ends_at is not None and ends_at <= starts_at:
        raise InvalidInput("ends_at", "must be after starts_at")
    check_occurs(recurrence, anchor=starts_at or created_at, zone=zone)
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
    customer = await customers_repo.get_customer(conn, values["customer_id"])
    if customer is None:
        raise InvalidInput("customer_id", f"no customer {values['customer_id']!r}")
    current = await schedules_repo.lock_schedule(conn, schedule_id)
    created_at = current["created_at"] if current is not None else now
    values = validate_schedule(values, customer_zone=customer["time_zone"], created_at=created_at)
    if current is None:
        initial = values | {"materialized_through": now}
        if await schedules_repo.insert_schedule(conn, schedule_id, initial, now=now):
            await _replan(conn, schedule_id, now=now, horizon_end=horizon_end, withdraw=False)
            return ScheduleUpsert(await get_schedule(conn, schedule_id), created=True)
        current = await schedules_repo.lock_schedule(conn, schedule_id)  # lost a create race
        assert current is not None
    changes = {name: value for name, value in values.items() if current[name] != value}
    revive = current["state"] == ScheduleState.DELETED
    repair = current["broken_at"] is not None
    if not changes and not revive and not repair:
        return ScheduleUpsert(await get_schedule(conn, schedule_id), created=False)
    if revive:
        changes["state"] = ScheduleState.ACTIVE.value
    await schedules_repo.update_schedule(conn, schedule_id, changes | _NOT_BROKEN, now=now)
    content = {name: changes[name] for name in CONTENT_FIELDS if name in changes}
    if content:
        await schedules_repo.update_open_content(conn, schedule_id, content, now=now)
    active = revive or current["state"] == ScheduleState.ACTIVE
    if active and (revive or repair or PLAN_FIELDS & changes.keys()):
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
            conn, schedule_id, {"state": ScheduleState.ACTIVE.value} | _NOT_BROKEN, now=now
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
    lookback = _REPLAN_LOOKBACK if quiet_hours(schedule) else timedelta(0)
    start = wall_minute(now - lookback, zones(schedule)[0])
    try:
        computed = compute_pass(schedule, after_local=start, until=horizon_end, due_after=now)
    except (ArithmeticError, ValueError) as error:  # validated input makes this rare
        raise InvalidInput("schedule", f"cannot be computed: {error}") from None
    await write_pass(conn, schedule, computed, now=now)
