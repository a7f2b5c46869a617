"""The sweep's materialization of recurring schedules into ordinary reminder rows.

Each sweep creates the occurrences whose instant falls inside the queue's delay horizon
(``now + max_delay``), bounded per schedule and per sweep; rows are written
insert-if-absent under deterministic ids (see ``app.services.schedules``). Occurrences
missed while the sweep was not running are created late and go out at once (the
receiver's usefulness rule may then drop them as ``expired``).

**One schedule never stops the others.** A pass first computes its occurrences (pure
CPU, bounded by ``app.domain.rrules``) and only then writes. When the computation fails —
a stored start date that no longer converts in the customer's new zone, a rule dateutil
refuses from this start — the schedule is marked broken (``broken_at``, ``broken_error``:
shown by the schedules API, the admin page and the ``reminders_schedules_broken`` gauge),
skipped by later sweeps until a PUT or a resume, and the sweep goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import schedules_repo
from app.db.ledger import reminder_rows
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

OCCURRENCES_PER_PASS = 500
SCHEDULES_PER_BATCH = 100
# The widest gap between two UTC offsets (-12:00 to +14:00): the most a customer moving
# zone can pull an occurrence forward.
_ZONE_SLACK = timedelta(hours=26)
# How far ahead the next occurrence is looked for when deciding the next visit.
_LOOKAHEAD = timedelta(days=400)


@dataclass(frozen=True, slots=True)
class Pass:
    """One computed pass over a schedule: what to write and where the cursors move."""

    rows: list[dict[str, Any]]
    cursor: datetime  # when the schedule needs a visit again
    local: datetime  # the local wall-clock time the next pass resumes after


def occurrence_id(schedule_id: str, occurrence: Occurrence) -> str:
    """The deterministic reminder id of one occurrence."""
    return f"{schedule_id}:{occurrence.key}"


def recurrence_of(schedule: dict[str, Any]) -> Recurrence:
    """The stored recurrence of a schedule row."""
    return parse_recurrence(
        rrule_text=schedule["rrule"],
        cron=schedule["cron"],
        local_time=schedule["local_time"],
        offset_days=schedule["offset_days"],
    )


def quiet_hours(schedule: dict[str, Any]) -> QuietHours | None:
    """The customer's quiet-hours window read with the schedule, if any."""
    start, end = schedule.get("quiet_hours_start"), schedule.get("quiet_hours_end")
    if not start or not end:
        return None
    window = QuietHours(parse_local_time(start), parse_local_time(end))
    return window if window.start != window.end else None


def zones(schedule: dict[str, Any]) -> tuple[ZoneInfo, ZoneInfo]:
    """(the schedule's zone, the customer's zone); the first defaults to the second."""
    customer_zone = parse_zone(schedule["customer_time_zone"])
    zone = parse_zone(schedule["time_zone"]) if schedule["time_zone"] else customer_zone
    return zone, customer_zone


def plan(
    schedule: dict[str, Any], *, after_local: datetime, until: datetime, limit: int | None
) -> list[Occurrence]:
    """The occurrences after a local time, up to an instant (a row with customer fields)."""
    zone, customer_zone = zones(schedule)
    return occurrences_between(
        recurrence_of(schedule),
        zone=zone,
        anchor=schedule["starts_at"] or schedule["created_at"],
        after_local=after_local,
        until=until,
        starts_at=schedule["starts_at"],
        ends_at=schedule["ends_at"],
        quiet=quiet_hours(schedule),
        quiet_zone=customer_zone,
        limit=limit,
    )


def compute_pass(
    schedule: dict[str, Any],
    *,
    after_local: datetime,
    until: datetime,
    due_after: datetime | None = None,
) -> Pass:
    """The occurrences after ``after_local`` up to ``until`` and the cursors; no I/O.

    The cursor is when the schedule needs a visit again: the last occurrence's instant when
    the pass was cut at ``OCCURRENCES_PER_PASS``, else a day before its next occurrence.
    """
    found = plan(schedule, after_local=after_local, until=until, limit=OCCURRENCES_PER_PASS)
    if len(found) >= OCCURRENCES_PER_PASS:
        cursor, local = found[-1].at, found[-1].local
    else:
        local = max(after_local, wall_minute(until, zones(schedule)[0]))
        cursor = _next_visit(schedule, local, until)
    wanted = [item for item in found if due_after is None or item.due_at > due_after]
    return Pass([_occurrence_row(schedule, item) for item in wanted], cursor, local)


async def write_pass(
    conn: AsyncConnection, schedule: dict[str, Any], computed: Pass, *, now: datetime
) -> int:
    """Create (or revive) the pass's occurrences and move the cursors; how many."""
    rows = computed.rows
    revived = await schedules_repo.revivable_occurrences(
        conn, schedule["id"], [row["id"] for row in rows], withdrawn_at=schedule["withdrawn_at"]
    )
    await schedules_repo.revive_occurrences(
        conn, [row for row in rows if row["id"] in revived], now=now
    )
    await reminder_rows.reset_open_sends(conn, sorted(revived), now=now)
    fresh = [row for row in rows if row["id"] not in revived]
    created = await schedules_repo.insert_occurrences(conn, fresh, now=now)
    await schedules_repo.set_materialized(
        conn, schedule["id"], through=computed.cursor, local=computed.local.strftime(KEY_FORMAT)
    )
    return created + len(revived)


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
        computed = compute_pass(schedule, after_local=_resume_point(schedule), until=horizon_end)
    except Exception as error:  # any failure of this one schedule's computation: isolate it
        message = f"{type(error).__name__}: {error}"
        log.error("schedule %s cannot be materialized: %s", schedule["id"], message)
        await schedules_repo.mark_broken(conn, schedule["id"], error=message, now=now)
        return 0, horizon_end
    return await write_pass(conn, schedule, computed, now=now), computed.cursor


def _resume_point(schedule: dict[str, Any]) -> datetime:
    if schedule["materialized_local"]:
        return datetime.strptime(schedule["materialized_local"], KEY_FORMAT)
    return wall_minute(schedule["created_at"], zones(schedule)[0])
