"""Bounded RRULE walks: the same occurrences as plain dateutil, in bounded CPU time."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from dateutil.rrule import rrulestr
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import InvalidInput
from app.domain.rrules import candidates, check_occurs, normalize_rrule

WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


def plain(text: str, dtstart: datetime, low: datetime, high: datetime) -> list[datetime]:
    """What dateutil itself yields in [low, high], walking from DTSTART."""
    found = []
    for local in rrulestr(text, dtstart=dtstart).xafter(low, inc=True):
        if local > high:
            break
        found.append(local)
    return found


@st.composite
def rules(draw) -> str:
    """RRULEs that always match somewhere (plain dateutil would walk to 9999 otherwise)."""
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY"]))
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.integers(1, 5))}"]
    if draw(st.booleans()):
        days = draw(st.lists(st.sampled_from(WEEKDAYS), min_size=1, max_size=3, unique=True))
        if freq in ("MONTHLY", "YEARLY") and draw(st.booleans()):
            days = [f"{draw(st.sampled_from(['1', '2', '-1']))}{day}" for day in days]
        parts.append("BYDAY=" + ",".join(days))
    elif draw(st.booleans()):
        parts.append(f"BYMONTHDAY={draw(st.integers(1, 28))}")
    if freq == "YEARLY" and draw(st.booleans()):
        parts.append(f"BYMONTH={draw(st.integers(1, 12))}")
    if freq == "HOURLY" and parts[1] == "INTERVAL=1" and draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, range(draw(st.integers(0, 2)), 24, 3))))
    ending = draw(st.sampled_from(["", "COUNT", "UNTIL"]))
    if ending == "COUNT":
        parts.append(f"COUNT={draw(st.integers(1, 40))}")
    elif ending == "UNTIL":
        parts.append(f"UNTIL={draw(st.integers(2024, 2032))}0615T120000")
    return ";".join(parts)


moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 12, 31)).map(
    lambda moment: moment.replace(second=0, microsecond=0)
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=rules(), dtstart=moments, low=moments, span_days=st.integers(0, 60))
def test_a_bounded_walk_yields_what_dateutil_yields(text, dtstart, low, span_days):
    """Starting near the window and giving up after the next year changes nothing."""
    high = low + timedelta(days=span_days)
    assert list(candidates(text, dtstart, low, high)) == plain(text, dtstart, low, high)


def cpu_seconds(action) -> float:
    started = time.thread_time()
    action()
    return time.thread_time() - started


@pytest.mark.parametrize(
    "text",
    [
        "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=30",  # 8.6 s of CPU before
        "FREQ=DAILY;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=DAILY;INTERVAL=7;BYDAY=TU",  # every 7th day from a Monday: never a Tuesday
        "FREQ=MONTHLY;INTERVAL=12;BYMONTH=3",  # every January only
        "FREQ=HOURLY;INTERVAL=2;BYHOUR=8",  # from 09:00 every other hour: odd hours only
    ],
)
def test_a_rule_that_never_occurs_is_refused_quickly(text):
    """No occurrence within the look-ahead: 422 naming rrule, in milliseconds of CPU."""
    normalize_rrule(text)

    def check() -> None:
        with pytest.raises(InvalidInput) as refused:
            check_occurs(text, datetime(2026, 1, 5, 9))  # a Monday in January
        assert refused.value.field == "rrule"

    assert cpu_seconds(check) < 0.1


def test_an_hourly_rule_from_long_ago_walks_only_the_window():
    """FREQ=HOURLY from 2000 walks one week of 2026, not 26 years of hours."""
    low, high = datetime(2026, 8, 10, 9), datetime(2026, 8, 17, 9)
    found: list[datetime] = []
    elapsed = cpu_seconds(
        lambda: found.extend(candidates("FREQ=HOURLY", datetime(2000, 1, 1, 9), low, high))
    )
    assert len(found) == 7 * 24 + 1
    assert elapsed < 0.05


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;COUNT=3", "COUNT is not reached"),
        ("FREQ=DAILY;COUNT=1001", "COUNT must be between"),
    ],
)
def test_a_count_out_of_reach_is_refused(text, message):
    """A COUNT walk starts at DTSTART, so its end must lie within the look-ahead."""
    with pytest.raises(InvalidInput, match=message):
        check_occurs(normalize_rrule(text), datetime(2026, 1, 5, 9))
