"""The ``log_lines`` fixture: what the service logs, as configured at startup, parsed."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from app.observability import logs as log_output
from app.observability.logs import StdoutHandler, configure_logging


@pytest.fixture
def log_lines():
    """Everything logged while the test runs, as configured at startup, but into a buffer."""
    buffer = io.StringIO()
    configure_logging("INFO", stream=buffer)
    yield lambda: [orjson.loads(line) for line in buffer.getvalue().splitlines()]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StdoutHandler)]:
        root.removeHandler(handler)
    log_output._stream = None  # back to stdout for later tests
