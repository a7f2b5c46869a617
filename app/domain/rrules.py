"""RFC 5545 RRULEs (python-dateutil) walked in bounded time, whatever the rule or its start.

dateutil walks a rule period by period from its DTSTART and, for a rule that never matches,
until the year 9999 (its UNTIL is only compared with matches): ``FREQ=HOURLY`` from year 1
took 64 s of CPU, a never-matching ``FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30`` 8.6 s, both on
the event loop. Three rules bound every walk here:

- **Start near the window.** A rule without COUNT gives the same occurrences from any start
  moved forward by whole intervals (years, months, weeks, days; hourly rules by whole days
  that are a multiple of the interval), once the parts dateutil would derive from DTSTART
  (BYMONTH, BYMONTHDAY, BYDAY) are written out. The walk starts an interval or two before
  the window instead of at DTSTART.
- **Stop after the window's next year.** dateutil's own iterator runs with its last year set
  to the one after the window's end instead of 9999 (``_bounded_walk``), so a rule without
  a match costs at most about two years of periods, not the calendar.
- **Refuse what cannot be walked usefully** (``check_occurs``, a 422 naming ``rrule``): a
  rule with no occurrence within ``LOOKAHEAD`` of its start, and a COUNT rule whose last
  occurrence lies beyond it (COUNT is counted from DTSTART, so its walk cannot start late).

Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import datetime as _datetime_module
import types
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta

import dateutil.rrule
from dateutil.rrule import rrule, rrulestr

from .errors import InvalidInput

# Sub-hourly RRULEs would make every materialization walk minute by minute; cron
# expresses them without that cost.
_REFUSED_FREQS = frozenset({"SECONDLY", "MINUTELY"})
_REFUSED_PARTS = frozenset({"DTSTART", "BYSECOND"})
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Parts whose presence stops dateutil deriving BYMONTHDAY / BYDAY from DTSTART.
_DAY_PARTS = frozenset({"BYWEEKNO", "BYYEARDAY", "BYMONTHDAY", "BYDAY", "BYEASTER"})
# How far ahead a rule must show an occurrence (a leap day recurs within eight years).
LOOKAHEAD = timedelta(days=3653)
MAX_COUNT = 1000


def rrule_parts(text: str) -> dict[str, str]:
    """``NAME=VALUE`` pairs of an RRULE value, names and values upper-cased."""
    parts: dict[str, str] = {}
    for item in text.split(";"):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput("rrule", f"{item!r} is not NAME=VALUE")
        parts[name.strip().upper()] = value.strip().upper()
    return parts


def normalize_rrule(text: str) -> str:
    """The RRULE value without an ``RRULE:`` prefix; InvalidInput naming ``rrule``."""
    text = text.strip()
    if text.upper().startswith("RRULE:"):
        text = text[len("RRULE:") :]
    if not text or "\n" in text or ":" in text:
        raise InvalidInput("rrule", "give one RRULE value, e.g. FREQ=WEEKLY;BYDAY=MO")
    parts = rrule_parts(text)
    if parts.get("FREQ") in _REFUSED_FREQS:
        raise InvalidInput("rrule", "FREQ below HOURLY is not supported; use cron instead")
    if refused := sorted(_REFUSED_PARTS & parts.keys()):
        raise InvalidInput("rrule", f"{', '.join(refused)} is not supported (use starts_at)")
    if "COUNT" in parts and "UNTIL" in parts:
        raise InvalidInput("rrule", "COUNT and UNTIL cannot both be given (RFC 5545)")
    if parts.get("UNTIL", "").endswith("Z"):
        raise InvalidInput(
            "rrule", "UNTIL is local wall-clock time here: drop the Z or use ends_at"
        )
    if "COUNT" in parts and not (parts["COUNT"].isascii() and parts["COUNT"].isdigit()):
        raise InvalidInput("rrule", "COUNT must be a whole number")
    if "COUNT" in parts and not 1 <= int(parts["COUNT"]) <= MAX_COUNT:
        raise InvalidInput("rrule", f"COUNT must be between 1 and {MAX_COUNT}")
    try:
        rule = rrulestr(text, dtstart=datetime(2000, 1, 1))
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as error:
        raise InvalidInput("rrule", f"invalid RRULE: {error}") from None
    if not isinstance(rule, rrule):
        raise InvalidInput("rrule", "give one RRULE value, e.g. FREQ=WEEKLY;BYDAY=MO")
    return text


def check_occurs(text: str, dtstart: datetime) -> None:
    """InvalidInput naming ``rrule`` unless the rule occurs (and ends, with COUNT) in time."""
    window = LOOKAHEAD
    parts = rrule_parts(text)
    wanted = int(parts.pop("COUNT", "1"))
    found = 0
    try:
        for _ in candidates(_rrule_text(parts), dtstart, dtstart, dtstart + window):
            found += 1
            if found >= wanted:
                return
    except ValueError as error:  # dateutil refuses e.g. a BYHOUR the INTERVAL never reaches
        raise InvalidInput("rrule", f"invalid RRULE from this start: {error}") from None
    span = f"{window.days} days"
    if found:
        raise InvalidInput("rrule", f"COUNT is not reached within {span} of the start: use UNTIL")
    raise InvalidInput("rrule", f"the rule has no occurrence within {span} of its start")


def candidates(text: str, dtstart: datetime, low: datetime, high: datetime) -> Iterator[datetime]:
    """The rule's local date-times in ``[low, high]``, walked from near ``low``."""
    parts = _with_explicit_days(rrule_parts(text), dtstart)
    count = int(parts.pop("COUNT")) if "COUNT" in parts else None
    # COUNT is counted from DTSTART: such a walk starts there (check_occurs keeps the
    # count within the look-ahead).
    start = dtstart if count is not None else _aligned_start(parts, dtstart, low)
    walk = _bounded_walk(rrulestr(_rrule_text(parts), dtstart=start), last_year=high.year + 1)
    for index, local in enumerate(walk):
        if (count is not None and index >= count) or local > high:
            return
        if local >= low:
            yield local


def _bounded_walk(rule: rrule, *, last_year: int) -> Iterator[datetime]:
    """dateutil's own iterator over ``rule``, giving up after ``last_year`` instead of 9999.

    The iterator's only way out without a match is ``datetime.MAXYEAR``, read from the
    module it was written in; this runs the same code with that one name rebound. The
    equivalence with plain dateutil is a property test (tests/unit/test_rrules.py).
    """
    calendar_module = types.SimpleNamespace(
        date=_datetime_module.date, datetime=_datetime_module.datetime, MAXYEAR=last_year
    )
    code = rrule._iter  # the generator function behind iter(rule)
    scope = {**vars(dateutil.rrule), "datetime": calendar_module}
    walk = types.FunctionType(code.__code__, scope, code.__name__, code.__defaults__)
    generator: Iterator[datetime] = walk(rule)
    return generator


def _rrule_text(parts: dict[str, str]) -> str:
    return ";".join(f"{name}={value}" for name, value in parts.items())


def _until(parts: dict[str, str]) -> datetime | None:
    value = parts.get("UNTIL")
    return datetime.fromisoformat(value) if value else None


def _with_explicit_days(parts: dict[str, str], dtstart: datetime) -> dict[str, str]:
    # What dateutil derives from DTSTART when no day part is given, written out so that a
    # later start derives nothing different.
    explicit = dict(parts)
    if _DAY_PARTS & parts.keys():
        return explicit
    freq = parts.get("FREQ")
    if freq == "YEARLY":
        explicit.setdefault("BYMONTH", str(dtstart.month))
        explicit["BYMONTHDAY"] = str(dtstart.day)
    elif freq == "MONTHLY":
        explicit["BYMONTHDAY"] = str(dtstart.day)
    elif freq == "WEEKLY":
        explicit["BYDAY"] = _WEEKDAYS[dtstart.weekday()]
    return explicit


def _aligned_start(parts: dict[str, str], dtstart: datetime, low: datetime) -> datetime:
    """The latest start a whole number of intervals after DTSTART, an interval before low."""
    interval = int(parts.get("INTERVAL", "1"))
    freq = parts.get("FREQ")
    if freq in ("YEARLY", "MONTHLY"):
        step = interval * (12 if freq == "YEARLY" else 1)
        steps = ((low.year - dtstart.year) * 12 + low.month - dtstart.month) // step - 1
        if steps < 1:
            return dtstart
        months = steps * step + dtstart.month - 1
        first = date(dtstart.year + months // 12, months % 12 + 1, 1)
        return datetime.combine(first, time(dtstart.hour, dtstart.minute))
    # WEEKLY: whole weeks keep the weekday and the week parity; DAILY and HOURLY: whole
    # days that are a multiple of the interval keep the phase and the time of day.
    step_days = interval * (7 if freq == "WEEKLY" else 1)
    steps = (low - dtstart).days // step_days - 1
    return dtstart + timedelta(days=steps * step_days) if steps >= 1 else dtstart
