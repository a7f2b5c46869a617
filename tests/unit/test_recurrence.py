"""Occurrences in time zones: DST gaps and overlaps, quiet hours, validation, bounded walks."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.errors import InvalidInput
from app.domain.recurrence import (
    QuietHours,
    Recurrence,
    apply_quiet_hours,
    occurrences_between,
    parse_recurrence,
    resolve_local,
    wall_minute,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
KOLKATA = ZoneInfo("Asia/Kolkata")
ANCHOR = datetime(2026, 1, 1, tzinfo=UTC)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def rule(text: str, at: str) -> Recurrence:
    return parse_recurrence(rrule_text=text, cron=None, local_time=at)


def cron(expression: str, offset_days: int = 0) -> Recurrence:
    return parse_recurrence(
        rrule_text=None, cron=expression, local_time=None, offset_days=offset_days
    )


def instants(recurrence: Recurrence, zone: ZoneInfo, after: datetime, until: datetime, **kw):
    found = occurrences_between(
        recurrence,
        zone=zone,
        anchor=ANCHOR,
        after_local=wall_minute(after, zone),
        until=until,
        **kw,
    )
    return [(item.key, item.at) for item in found]


@pytest.mark.parametrize(
    ("zone", "local", "expected"),
    [
        # Spring forward: the missing time moves to the instant the clocks jump.
        (BERLIN, datetime(2026, 3, 29, 2, 30), utc(2026, 3, 29, 1, 0)),  # 03:00 CEST
        (NEW_YORK, datetime(2026, 3, 8, 2, 30), utc(2026, 3, 8, 7, 0)),  # 03:00 EDT
        (LORD_HOWE, datetime(2026, 10, 4, 2, 15), utc(2026, 10, 3, 15, 30)),  # 02:30 +11:00
        # Fall back: the earlier of the two instants (fold=0, the summer offset).
        (BERLIN, datetime(2026, 10, 25, 2, 30), utc(2026, 10, 25, 0, 30)),  # 02:30 CEST
        (NEW_YORK, datetime(2026, 11, 1, 1, 30), utc(2026, 11, 1, 5, 30)),  # 01:30 EDT
        (LORD_HOWE, datetime(2026, 4, 5, 1, 45), utc(2026, 4, 4, 14, 45)),  # 01:45 +11:00
        # Ordinary times, and a zone without DST.
        (LORD_HOWE, datetime(2026, 4, 5, 2, 0), utc(2026, 4, 4, 15, 30)),  # 02:00 +10:30
        (BERLIN, datetime(2026, 7, 1, 9, 0), utc(2026, 7, 1, 7, 0)),
        (KOLKATA, datetime(2026, 3, 29, 2, 30), utc(2026, 3, 28, 21, 0)),
    ],
)
def test_resolve_local_applies_the_gap_and_overlap_rules(zone, local, expected):
    """A missing local time moves to the jump; a repeated one takes its first instant."""
    assert resolve_local(local, zone) == expected


def test_weekly_monday_nine_in_berlin_follows_the_local_clock_across_dst():
    """Monday 09:00 Berlin is 08:00 UTC in winter and 07:00 UTC in summer."""
    found = instants(
        rule("FREQ=WEEKLY;BYDAY=MO", "09:00"), BERLIN, utc(2026, 3, 20), utc(2026, 4, 7)
    )
    assert found == [
        ("2026-03-23T09:00", utc(2026, 3, 23, 8)),
        ("2026-03-30T09:00", utc(2026, 3, 30, 7)),
        ("2026-04-06T09:00", utc(2026, 4, 6, 7)),
    ]


def test_daily_half_past_two_in_berlin_through_both_transitions():
    """02:30 daily: moved to 03:00 on the spring day, the first 02:30 on the autumn day."""
    daily = rule("FREQ=DAILY", "02:30")
    spring = instants(daily, BERLIN, utc(2026, 3, 27, 12), utc(2026, 3, 30, 12))
    autumn = instants(daily, BERLIN, utc(2026, 10, 24, 12), utc(2026, 10, 26, 12))
    assert spring == [
        ("2026-03-28T02:30", utc(2026, 3, 28, 1, 30)),
        ("2026-03-29T02:30", utc(2026, 3, 29, 1, 0)),
        ("2026-03-30T02:30", utc(2026, 3, 30, 0, 30)),
    ]
    assert autumn == [
        ("2026-10-25T02:30", utc(2026, 10, 25, 0, 30)),
        ("2026-10-26T02:30", utc(2026, 10, 26, 1, 30)),
    ]


def test_new_york_cron_every_half_hour_never_repeats_the_overlap():
    """Cron at :00 and :30 during the New York fall-back produces each wall time once."""
    found = instants(cron("0,30 1 * * *"), NEW_YORK, utc(2026, 11, 1, 4), utc(2026, 11, 1, 8))
    assert found == [
        ("2026-11-01T01:00", utc(2026, 11, 1, 5, 0)),
        ("2026-11-01T01:30", utc(2026, 11, 1, 5, 30)),
    ]


def test_lord_howe_half_hour_shift_on_both_transition_sundays():
    """Lord Howe moves its clocks by 30 minutes: gap 02:00-02:30, overlap 01:30-02:00."""
    sundays = rule("FREQ=WEEKLY;BYDAY=SU;BYHOUR=1,2;BYMINUTE=15,45", "00:00")
    april = instants(sundays, LORD_HOWE, utc(2026, 4, 4, 12), utc(2026, 4, 4, 18))
    october = instants(sundays, LORD_HOWE, utc(2026, 10, 3, 12), utc(2026, 10, 3, 18))
    assert april == [
        ("2026-04-05T01:15", utc(2026, 4, 4, 14, 15)),  # +11:00
        ("2026-04-05T01:45", utc(2026, 4, 4, 14, 45)),  # the first 01:45, +11:00
        ("2026-04-05T02:15", utc(2026, 4, 4, 15, 45)),  # +10:30
        ("2026-04-05T02:45", utc(2026, 4, 4, 16, 15)),
    ]
    assert october == [
        ("2026-10-04T01:15", utc(2026, 10, 3, 14, 45)),  # +10:30
        ("2026-10-04T01:45", utc(2026, 10, 3, 15, 15)),
        ("2026-10-04T02:15", utc(2026, 10, 3, 15, 30)),  # in the gap: 02:30 +11:00
        ("2026-10-04T02:45", utc(2026, 10, 3, 15, 45)),
    ]


def test_kolkata_has_the_same_utc_time_all_year():
    """A zone without DST maps 09:00 to 03:30 UTC on every day of the year."""
    found = occurrences_between(
        rule("FREQ=DAILY", "09:00"), zone=KOLKATA, anchor=ANCHOR,
        after_local=datetime(2026, 1, 1), until=utc(2027, 1, 1),
    )  # fmt: skip
    assert len(found) == 365
    assert {(item.at.hour, item.at.minute) for item in found} == {(3, 30)}


def test_offset_days_gives_three_days_before_a_date():
    """offset_days=-3 on a yearly date is a reminder 3 days before it, keyed by its own day."""
    renewal = parse_recurrence(
        rrule_text="FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=15", cron=None, local_time="10:00",
        offset_days=-3,
    )  # fmt: skip
    found = instants(renewal, NEW_YORK, utc(2026, 1, 1), utc(2028, 1, 1))
    assert found == [
        ("2026-03-12T10:00", utc(2026, 3, 12, 14)),  # EDT: DST began on 2026-03-08
        ("2027-03-12T10:00", utc(2027, 3, 12, 15)),  # EST: DST begins on 2027-03-14
    ]


def test_starts_at_and_ends_at_bound_the_occurrences():
    """Nothing before starts_at or after ends_at, both inclusive."""
    found = occurrences_between(
        rule("FREQ=DAILY", "09:00"), zone=ZoneInfo("UTC"), anchor=ANCHOR,
        after_local=datetime(2026, 1, 1), until=utc(2026, 2, 1),
        starts_at=utc(2026, 1, 10, 9), ends_at=utc(2026, 1, 12, 9),
    )  # fmt: skip
    assert [item.key for item in found] == [
        "2026-01-10T09:00",
        "2026-01-11T09:00",
        "2026-01-12T09:00",
    ]


def test_a_walk_resumes_after_the_last_local_time_even_inside_a_gap():
    """Five local times in the spring gap share one instant; limit=2 walks still get each once."""
    every_quarter = cron("*/15 2-3 29 3 *")  # 02:00..03:45 Berlin on the spring-forward day
    keys, cursor = [], datetime(2026, 3, 28)
    while part := occurrences_between(
        every_quarter, zone=BERLIN, anchor=ANCHOR, after_local=cursor, until=utc(2026, 3, 30),
        limit=2,
    ):  # fmt: skip
        keys += [item.key for item in part]
        cursor = part[-1].local
    assert keys == [
        "2026-03-29T02:00", "2026-03-29T02:15", "2026-03-29T02:30", "2026-03-29T02:45",
        "2026-03-29T03:00", "2026-03-29T03:15", "2026-03-29T03:30", "2026-03-29T03:45",
    ]  # fmt: skip


def test_a_zone_change_between_walks_neither_skips_nor_repeats():
    """Monday 09:00: walked in New York up to a cursor, then in Berlin, every Monday once."""
    weekly = cron("0 9 * * 1")
    until = utc(2026, 8, 17, 8)  # before 09:00 in New York (13:00 UTC), after it in Berlin
    first = occurrences_between(
        weekly, zone=NEW_YORK, anchor=ANCHOR, after_local=datetime(2026, 8, 1), until=until
    )
    cursor = max(datetime(2026, 8, 1), wall_minute(until, NEW_YORK))
    then = occurrences_between(weekly, zone=BERLIN, anchor=ANCHOR, after_local=cursor, until=until)
    assert [(item.key, item.at) for item in first + then] == [
        ("2026-08-03T09:00", utc(2026, 8, 3, 13)),
        ("2026-08-10T09:00", utc(2026, 8, 10, 13)),
        ("2026-08-17T09:00", utc(2026, 8, 17, 7)),  # Berlin's 09:00 is already inside
    ]


@pytest.mark.parametrize(
    ("quiet", "local", "expected_local"),
    [
        (("22:00", "07:00"), datetime(2026, 6, 1, 23, 30), datetime(2026, 6, 2, 7, 0)),
        (("22:00", "07:00"), datetime(2026, 6, 1, 6, 59), datetime(2026, 6, 1, 7, 0)),
        (("22:00", "07:00"), datetime(2026, 6, 1, 22, 0), datetime(2026, 6, 2, 7, 0)),
        (("22:00", "07:00"), datetime(2026, 6, 1, 7, 0), datetime(2026, 6, 1, 7, 0)),
        (("22:00", "07:00"), datetime(2026, 6, 1, 12, 0), datetime(2026, 6, 1, 12, 0)),
        (("12:00", "14:00"), datetime(2026, 6, 1, 13, 0), datetime(2026, 6, 1, 14, 0)),
        (("12:00", "14:00"), datetime(2026, 6, 1, 14, 0), datetime(2026, 6, 1, 14, 0)),
    ],
)
def test_quiet_hours_move_an_occurrence_to_the_window_end(quiet, local, expected_local):
    """Inside the window (start included, end excluded) → the window's end, local time."""
    window = QuietHours(time.fromisoformat(quiet[0]), time.fromisoformat(quiet[1]))
    at = local.replace(tzinfo=KOLKATA).astimezone(UTC)
    moved = apply_quiet_hours(at, window, KOLKATA)
    assert moved.astimezone(KOLKATA).replace(tzinfo=None) == expected_local


def test_quiet_hours_ending_in_a_dst_gap_end_at_the_jump():
    """A window ending at 02:30 on the Berlin spring-forward night ends at 03:00 CEST."""
    window = QuietHours(time(22, 0), time(2, 30))
    at = datetime(2026, 3, 28, 23, 0, tzinfo=BERLIN).astimezone(UTC)
    assert apply_quiet_hours(at, window, BERLIN) == utc(2026, 3, 29, 1, 0)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"rrule_text": "FREQ=SOMETIMES", "local_time": "09:00"}, "rrule"),
        ({"rrule_text": "FREQ=WEEKLY;BYDAY=XX", "local_time": "09:00"}, "rrule"),
        ({"rrule_text": "FREQ=MINUTELY", "local_time": "09:00"}, "rrule"),
        ({"rrule_text": "FREQ=DAILY;BYSECOND=5", "local_time": "09:00"}, "rrule"),
        ({"rrule_text": "FREQ=DAILY;UNTIL=20270101T000000Z", "local_time": "09:00"}, "rrule"),
        ({"rrule_text": "FREQ=DAILY;COUNT=2;UNTIL=20270101", "local_time": "09:00"}, "rrule"),
        (
            {"rrule_text": "DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "local_time": "09:00"},
            "rrule",
        ),
        ({"rrule_text": "FREQ=DAILY", "local_time": "24:00"}, "local_time"),
        ({"rrule_text": "FREQ=DAILY", "local_time": "9am"}, "local_time"),
        ({"rrule_text": "FREQ=DAILY"}, "local_time"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 9 * * 1 2026"}, "cron"),
        ({"cron": "0 0 31 2 *"}, "cron"),
        ({"cron": "0 9 * * 1", "local_time": "09:00"}, "local_time"),
        ({}, "rrule"),
        ({"rrule_text": "FREQ=DAILY", "cron": "0 9 * * *", "local_time": "09:00"}, "rrule"),
    ],
)
def test_invalid_recurrences_name_the_field(fields, field):
    """Every refusal says which field is wrong."""
    arguments = {"rrule_text": None, "cron": None, "local_time": None} | fields
    with pytest.raises(InvalidInput) as raised:
        parse_recurrence(**arguments)
    assert raised.value.field == field


def test_an_rrule_prefix_and_cron_aliases_are_accepted():
    """``RRULE:`` may prefix the rule; ``@weekly`` style cron aliases work."""
    assert rule("RRULE:FREQ=WEEKLY;BYDAY=MO", "09:00").rrule == "FREQ=WEEKLY;BYDAY=MO"
    assert cron("@weekly").cron == "@weekly"


# --- properties ---------------------------------------------------------------------------

ZONES = [BERLIN, NEW_YORK, LORD_HOWE, KOLKATA, ZoneInfo("UTC")]
TRANSITION_DAYS = [
    datetime(2026, 3, 29), datetime(2026, 10, 25), datetime(2026, 3, 8), datetime(2026, 11, 1),
    datetime(2026, 4, 5), datetime(2026, 10, 4), datetime(2027, 3, 28), datetime(2027, 4, 4),
]  # fmt: skip
near_transitions = st.builds(
    lambda day, minutes: day + timedelta(minutes=minutes),
    st.sampled_from(TRANSITION_DAYS),
    st.integers(min_value=0, max_value=5 * 60),
)
any_local = st.one_of(
    near_transitions, st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1))
)


def wall(moment: datetime, zone: ZoneInfo) -> datetime:
    return moment.astimezone(zone).replace(tzinfo=None)


@settings(max_examples=300, deadline=None)
@given(zone=st.sampled_from(ZONES), local=any_local)
def test_resolution_is_the_earliest_instant_at_or_after_the_wall_time(zone, local):
    """The result shows ``local`` (or, in a gap, the jump's end) and nothing earlier does."""
    local = local.replace(second=0, microsecond=0)
    resolved = resolve_local(local, zone)
    shown = wall(resolved, zone)
    assert shown >= local
    assert shown == local or shown - local <= timedelta(hours=1)  # only a gap moves it
    for step in range(1, 13):  # the three hours before show earlier wall times only
        assert wall(resolved - timedelta(minutes=15 * step), zone) < local


@settings(max_examples=200, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    moment=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 1, 1)),
    start=st.integers(0, 23 * 60 + 59),
    end=st.integers(0, 23 * 60 + 59),
)
def test_quiet_hours_never_leave_an_occurrence_inside_the_window(zone, moment, start, end):
    """After the rule the instant is outside the window, not earlier, and at most a day later."""
    if start == end:
        return
    window = QuietHours(time(start // 60, start % 60), time(end // 60, end % 60))
    at = moment.replace(tzinfo=UTC)
    moved = apply_quiet_hours(at, window, zone)
    assert at <= moved <= at + timedelta(hours=25)
    assert not window.contains(wall(moved, zone).time())
    if not window.contains(wall(at, zone).time()):
        assert moved == at


@settings(max_examples=25, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    expression=st.sampled_from(["*/20 * * * *", "15,45 1-3 * * *", "0 9 * * 1", "30 2 * * 0"]),
    limit=st.integers(5, 40),
)
def test_walking_in_bounded_chunks_equals_one_walk(zone, expression, limit):
    """Cutting at ``limit`` and resuming after the last local time misses and repeats nothing."""
    recurrence = cron(expression)
    start, until = datetime(2026, 3, 27), utc(2026, 4, 6)  # Berlin's and Lord Howe's changes
    whole = occurrences_between(
        recurrence, zone=zone, anchor=ANCHOR, after_local=start, until=until
    )
    chunks, cursor = [], start
    while part := occurrences_between(
        recurrence, zone=zone, anchor=ANCHOR, after_local=cursor, until=until, limit=limit
    ):
        chunks.extend(part)
        cursor = part[-1].local
    assert chunks == whole
    assert len({item.key for item in whole}) == len(whole)
    assert [item.at for item in whole] == sorted(item.at for item in whole)
