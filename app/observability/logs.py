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
from typing import Any, TextIO

import orjson
import structlog

_SHARED_PROCESSORS: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
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
    exceptions = [] if log_format == "console" else [structlog.processors.format_exc_info]
    structlog.configure(
        processors=[*_SHARED_PROCESSORS, *exceptions, _renderer(log_format)],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_writer,
        cache_logger_on_first_use=True,
    )


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
