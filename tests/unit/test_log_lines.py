"""The per-delivery line written without structlog's bound logger (``EventLog``) is the line
structlog writes; the ``ts`` field is UTC to the microsecond."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
import structlog

from app.observability import logs

FIELDS = {"queue": "reminders", "message_id": "m-1", "ack": True, "retry_after": None}


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    handlers, level = list(logging.getLogger().handlers), logging.getLogger().level
    yield
    logs.configure_logging("INFO", log_format="json")
    logging.getLogger().handlers[:] = handlers
    logging.getLogger().setLevel(level)
    structlog.contextvars.clear_contextvars()


def _without_stamp(line: str) -> str:
    return re.sub(r"ts=\S+", "", line)


def _lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_the_direct_line_is_the_line_structlog_writes(log_format: str) -> None:
    stream = io.StringIO()
    logs.configure_logging("INFO", log_format=log_format, stream=stream)
    structlog.contextvars.bind_contextvars(request_id="r-1")

    structlog.get_logger("reminders.delivery").warning("delivery", **FIELDS)
    logs.EventLog("reminders.delivery").log("warning", "delivery", dict(FIELDS))

    by_structlog, direct = _lines(stream)
    if log_format == "json":
        by_structlog_fields, direct_fields = json.loads(by_structlog), json.loads(direct)
        assert by_structlog_fields.pop("ts")[:19] == direct_fields.pop("ts")[:19]
        assert list(direct_fields.items()) == list(by_structlog_fields.items())
        assert direct_fields["level"] == "warning" and direct_fields["request_id"] == "r-1"
    else:  # the same text but for the time stamp (and the colour codes around it)
        assert _without_stamp(by_structlog) == _without_stamp(direct)
        assert "request_id=r-1" in direct


def test_a_line_below_the_configured_level_is_not_written() -> None:
    stream = io.StringIO()
    logs.configure_logging("WARNING", log_format="json", stream=stream)
    events = logs.EventLog("reminders.delivery")

    assert not events.is_enabled_for("info")
    events.log("info", "delivery", dict(FIELDS))
    events.log("error", "delivery", dict(FIELDS))

    assert [json.loads(line)["level"] for line in _lines(stream)] == ["error"]


def test_the_stamp_is_utc_to_the_microsecond_across_seconds() -> None:
    times = iter(
        [1796650178_841872_999, 1796650178_000001_000, 1796650179_000000_000, 1796650179_500000_000]
    )
    stamp = logs.UtcStamp(clock=lambda: next(times))

    stamps = [stamp(None, "info", {})["ts"] for _ in range(4)]

    assert stamps == [
        "2026-12-07T13:29:38.841872Z",
        "2026-12-07T13:29:38.000001Z",
        "2026-12-07T13:29:39.000000Z",
        "2026-12-07T13:29:39.500000Z",
    ]
