"""Structured logs on stdout (on stderr for commands, whose stdout is their answer),
configured once at startup: JSON lines for machines (the stream is not a terminal, or
``REMINDERS_LOG_FORMAT=json``), structlog's console format for people (a terminal, or
``REMINDERS_LOG_FORMAT=console``). The fields are the same either way.

structlog events (the per-delivery line) take the fast path: processors render JSON and
a tiny writer puts it on stdout (measured ~10x cheaper than routing through stdlib
logging). Plain ``logging`` records of libraries and older modules go through one stdlib
handler that renders the same JSON shape. Logs carry identifiers only: never a secret,
never a message body, address or rendered text.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson
import structlog


class UtcStamp:
    """The ``ts`` field: ISO 8601 in UTC to the microsecond (``2026-12-07T13:49:38.841872Z``).
    The date and time of day are formatted once a second: structlog's TimeStamper built a
    datetime per line, ~1.6 µs of the delivery line's ~9."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._second = -1
        self._prefix = ""

    def __call__(self, logger: Any, method_name: str, event_dict: dict[str, Any]) -> Any:
        second, micros = divmod(self._clock() // 1000, 1_000_000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        event_dict["ts"] = f"{self._prefix}.{micros:06d}Z"
        return event_dict


_SHARED_PROCESSORS: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    UtcStamp(),
]
_stream: TextIO | None = None  # None: whatever sys.stdout is at write time (runners swap it)
_to_stderr = False  # commands: sys.stderr at write time, keeping stdout for their answer


def _orjson_dumps(value: Any, **_: Any) -> str:
    return orjson.dumps(value, default=str).decode()


class JsonLineWriter:
    """structlog's output: one rendered line per event, flushed (containers read pipes)."""

    def __init__(self, name: str = "") -> None:
        self.name = name

    def msg(self, message: str) -> None:
        """Write one line."""
        stream = _output()
        stream.write(message + "\n")
        stream.flush()

    debug = info = warning = warn = error = critical = exception = fatal = msg


def _writer(name: str = "", *_: Any) -> JsonLineWriter:
    return JsonLineWriter(name)


def _renderer(log_format: str) -> Any:
    if log_format == "console":
        return structlog.dev.ConsoleRenderer(colors=_output().isatty())
    return structlog.processors.JSONRenderer(serializer=_orjson_dumps)


def _output() -> TextIO:
    if _stream is not None:
        return _stream
    return sys.stderr if _to_stderr else sys.stdout


def resolve_format(log_format: str) -> str:
    """``json`` or ``console``: ``auto`` is console on a terminal, JSON anywhere else."""
    if log_format != "auto":
        return log_format
    return "console" if _output().isatty() else "json"


def _configure_structlog(level: int, log_format: str = "json") -> None:
    global _processors, _level
    exceptions = [] if log_format == "console" else [structlog.processors.format_exc_info]
    _processors = [*_SHARED_PROCESSORS, *exceptions, _renderer(log_format)]
    _level = level
    structlog.configure(
        processors=_processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_writer,
        cache_logger_on_first_use=True,
    )


_processors: list[Any] = []
_level = logging.INFO
_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class EventLog:
    """One logger's events through the configured processors and writer, called directly.

    For the line written per delivery: structlog's bound logger passes the fields through
    three layers of keyword arguments and copies them twice, ~3 µs of the line's ~9
    (``bench/README.md``). The line is the one structlog writes: same processors, same
    order, same writer; levels (structlog's method names) are ``info``, ``warning`` or
    ``error``.
    """

    def __init__(self, name: str) -> None:
        self.writer = JsonLineWriter(name)

    @staticmethod
    def is_enabled_for(method: str) -> bool:
        """Whether a line at level ``method`` is written (so its fields need not be built)."""
        return _LEVELS[method] >= _level

    def log(self, method: str, event: str, fields: dict[str, Any]) -> None:
        """Write ``event`` with ``fields`` (taken, not copied) at level ``method``, if enabled."""
        if not self.is_enabled_for(method):
            return
        fields["event"] = event
        line: Any = fields
        for processor in _processors:
            line = processor(self.writer, method, line)
        self.writer.msg(line)


_configure_structlog(logging.INFO)  # at import, so no logger is ever cached with defaults


def record_formatter(log_format: str = "json") -> logging.Formatter:
    """Renders plain ``logging`` records as the same lines as structlog's (JSON by default)."""
    exceptions = [] if log_format == "console" else [structlog.processors.format_exc_info]
    return structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED_PROCESSORS,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *exceptions,
            _renderer(log_format),
        ],
    )


class StdoutHandler(logging.StreamHandler):
    """Writes to the configured stream, else whatever ``sys.stdout`` (or, for commands,
    ``sys.stderr``) is at emit time."""

    @property
    def stream(self) -> TextIO:
        """The configured stream, else the current stdout (or stderr)."""
        return _output()

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass  # logging.StreamHandler.__init__ assigns it; the property decides


def configure_logging(
    level: str = "INFO",
    *,
    log_format: str = "auto",
    stream: TextIO | None = None,
    stderr: bool = False,
) -> None:
    """Logs on stdout (``stderr=True``: on stderr, for commands whose stdout is their answer)
    for structlog and stdlib loggers, in ``log_format`` (``auto``, ``json`` or ``console``);
    idempotent, call at startup."""
    global _stream, _to_stderr
    _stream, _to_stderr = stream, stderr
    numeric = logging.getLevelNamesMapping()[level]
    chosen = resolve_format(log_format)
    _configure_structlog(numeric, chosen)
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StdoutHandler)]:
        root.removeHandler(handler)
    handler = StdoutHandler()
    handler.setFormatter(record_formatter(chosen))
    root.addHandler(handler)
    root.setLevel(numeric)
    # uvicorn's own loggers propagate to the root handler instead of printing text; the
    # access log only when uvicorn keeps one (``access_log=False``, as ``reminders serve``
    # runs, leaves it without handlers and not propagating: re-enabling it cost a stdlib
    # log record per request, bench/push.py).
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if name == "uvicorn.access" and not logger.handlers and not logger.propagate:
            continue
        logger.handlers.clear()
        logger.propagate = True
