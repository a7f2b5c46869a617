"""Occurrences of a recurring schedule: wall-clock rules in a time zone, resolved to UTC.

A schedule repeats on **local wall-clock time** in its IANA zone: an RFC 5545 RRULE
(python-dateutil) at ``local_time``, or a five-field cron expression (croniter), both
evaluated on naive local date-times, optionally shifted by ``offset_days`` (a renewal
notice 3 days before each renewal date). Each nominal local date-time is then resolved
to one UTC instant by two documented rules:

- **Spring-forward gap** (a local time that does not exist, e.g. 02:30 in Berlin on the
  last Sunday of March): the occurrence moves forward to the first valid instant, the
  moment the clocks jump (03:00 CEST in Berlin, 02:30 +11:00 on Lord Howe Island).
- **Fall-back overlap** (a local time that happens twice, e.g. 02:30 in Berlin on the
  last Sunday of October): the first of the two (``fold=0``, the pre-transition offset).

Quiet hours are a per-customer window of local times (``22:00``-``07:00`` wraps past
midnight; the start is inside the window, the end is not). An occurrence whose instant
falls inside the window, read in the customer's zone, moves to the window's end in that
zone (itself resolved by the gap rule). The occurrence keeps its identity: its key is
the nominal local date-time, before the gap rule and quiet hours.

Pure functions: no I/O, no database, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from . import rrules
from .errors import InvalidInput

KEY_FORMAT = "%Y-%m-%dT%H:%M"
_LOCAL_TIME = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
# Offsets are sampled this far around the window's end to bound the local candidates.
_NEIGHBOURHOOD = (timedelta(days=-2), timedelta(0), timedelta(days=2))


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window of local times in which nothing is sent; it may wrap past midnight."""

    start: time
    end: time

    def contains(self, moment: time) -> bool:
        """True when the local time of day is inside the window (start in, end out)."""
        if self.start < self.end:
            return self.start <= moment < self.end
        return moment >= self.start or moment < self.end


@dataclass(frozen=True, slots=True)
class Recurrence:
    """When a schedule repeats, in local wall-clock terms (validated by ``parse_recurrence``)."""

    rrule: str | None
    cron: str | None
    local_time: time | None
    offset_days: int = 0


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence: its nominal local date-time (its identity) and its UTC instants."""

    local: datetime  # naive, in the schedule's zone, after offset_days
    at: datetime  # UTC, after the gap/overlap rule
    due_at: datetime  # UTC, after quiet hours

    @property
    def key(self) -> str:
        """The stable suffix of the occurrence's reminder id, e.g. ``2026-08-17T09:00``."""
        return self.local.strftime(KEY_FORMAT)


def parse_local_time(value: str, *, field: str = "local_time") -> time:
    """``HH:MM`` (24-hour) as a time of day; InvalidInput naming ``field`` otherwise."""
    match = _LOCAL_TIME.match(value)
    if not match:
        raise InvalidInput(field, f"{value!r} is not a 24-hour HH:MM time")
    return time(int(match.group(1)), int(match.group(2)))


def parse_zone(name: str, *, field: str = "time_zone") -> ZoneInfo:
    """An IANA zone by name; InvalidInput naming ``field`` when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(field, f"unknown IANA time zone {name!r}") from None


def parse_recurrence(
    *, rrule_text: str | None, cron: str | None, local_time: str | None, offset_days: int = 0
) -> Recurrence:
    """Validate one of an RRULE (with ``local_time``) or a cron expression (without it)."""
    if (rrule_text is None) == (cron is None):
        raise InvalidInput("rrule", "give exactly one of rrule or cron")
    if cron is not None:
        if local_time is not None:
            raise InvalidInput("local_time", "a cron expression carries its own time of day")
        return Recurrence(None, _check_cron(cron), None, offset_days)
    if local_time is None:
        raise InvalidInput("local_time", "an rrule needs the local time of day (HH:MM)")
    at = parse_local_time(local_time)
    return Recurrence(rrules.normalize_rrule(rrule_text or ""), None, at, offset_days)


def _check_cron(expression: str) -> str:
    expression = " ".join(expression.split())
    if not (expression.startswith("@") or len(expression.split(" ")) == 5):
        raise InvalidInput("cron", "use five fields: minute hour day-of-month month day-of-week")
    if not croniter.is_valid(expression):
        raise InvalidInput("cron", f"invalid cron expression {expression!r}")
    try:
        croniter(expression, datetime(2000, 1, 1)).get_next(datetime)
    except Exception:  # croniter raises its own error types when nothing ever matches
        raise InvalidInput("cron", f"{expression!r} never matches a date") from None
    return expression


def resolve_local(local: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a naive local date-time: gaps move forward, overlaps take the first."""
    first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == local:
        return first  # it exists; in an overlap fold=0 is the earlier of the two
    # In a gap fold=1 applies the post-transition offset: an instant before the jump.
    before = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return _transition_between(before, first, zone)


def _transition_between(low: datetime, high: datetime, zone: ZoneInfo) -> datetime:
    # Smallest whole second in (low, high] whose UTC offset differs from low's.
    offset = low.astimezone(zone).utcoffset()
    lo, hi = 0, int((high - low).total_seconds())
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if (low + timedelta(seconds=middle)).astimezone(zone).utcoffset() == offset:
            lo = middle
        else:
            hi = middle
    return low + timedelta(seconds=hi)


def apply_quiet_hours(at: datetime, quiet: QuietHours | None, zone: ZoneInfo) -> datetime:
    """Move an instant inside the quiet window to the window's end, in ``zone``."""
    if quiet is None:
        return at
    local = at.astimezone(zone)
    if not quiet.contains(local.time().replace(tzinfo=None)):
        return at
    end_date = local.date()
    if quiet.start > quiet.end and local.time().replace(tzinfo=None) >= quiet.start:
        end_date += timedelta(days=1)  # a window wrapping past midnight ends tomorrow
    return resolve_local(datetime.combine(end_date, quiet.end), zone)


def _dtstart(recurrence: Recurrence, anchor: datetime, zone: ZoneInfo) -> datetime:
    assert recurrence.local_time is not None
    return datetime.combine(anchor.astimezone(zone).date(), recurrence.local_time)


def check_occurs(recurrence: Recurrence, *, anchor: datetime, zone: ZoneInfo) -> None:
    """InvalidInput naming ``rrule`` when an RRULE cannot be walked in bounded time from
    ``anchor`` (see ``app.domain.rrules``); cron expressions were checked when parsed."""
    if recurrence.rrule is not None:
        rrules.check_occurs(recurrence.rrule, _dtstart(recurrence, anchor, zone))


def _cron_candidates(recurrence: Recurrence, low: datetime, high: datetime) -> Iterator[datetime]:
    assert recurrence.cron is not None
    schedule = croniter(recurrence.cron, low - timedelta(minutes=1))
    while (local := schedule.get_next(datetime)) <= high:
        yield local


def wall_minute(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive local wall-clock time of an instant in ``zone``, floored to the minute."""
    return instant.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)


def _latest_local(until: datetime, zone: ZoneInfo) -> datetime:
    # No local time after this can resolve at or before ``until``: resolution subtracts an
    # offset in force near ``until`` (a gap's jump included).
    offsets = [
        (until + step).astimezone(zone).utcoffset() or timedelta(0) for step in _NEIGHBOURHOOD
    ]
    return until.astimezone(UTC).replace(tzinfo=None) + max(offsets) + timedelta(minutes=1)


def occurrences_between(
    recurrence: Recurrence,
    *,
    zone: ZoneInfo,
    anchor: datetime,
    after_local: datetime,
    until: datetime,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    quiet: QuietHours | None = None,
    quiet_zone: ZoneInfo | None = None,
    limit: int | None = None,
) -> list[Occurrence]:
    """Occurrences with a local time after ``after_local`` and an instant up to ``until``.

    Progress is measured in local wall-clock time, the occurrences' identity: resuming
    from the last local time returned neither repeats nor skips one, even if the zone
    changed in between. ``anchor`` (UTC) is where an RRULE starts (its DTSTART's date in
    ``zone``). At most ``limit`` occurrences, in order.
    """
    shift = timedelta(days=recurrence.offset_days)
    low, high = after_local - shift, _latest_local(until, zone) - shift
    if recurrence.rrule is not None:
        dtstart = _dtstart(recurrence, anchor, zone)
        candidates = rrules.candidates(recurrence.rrule, dtstart, low, high)
    else:
        candidates = _cron_candidates(recurrence, low, high)
    found: list[Occurrence] = []
    # Resolution is monotonic (a later local time never maps to an earlier instant), so
    # the walk can stop at the first instant past ``until``.
    for nominal in candidates:
        local = nominal + shift
        if local <= after_local:
            continue
        at = resolve_local(local, zone)
        if at > until or (ends_at and at > ends_at):
            break
        if starts_at and at < starts_at:
            continue
        found.append(Occurrence(local, at, apply_quiet_hours(at, quiet, quiet_zone or zone)))
        if limit is not None and len(found) >= limit:
            break
    return found
