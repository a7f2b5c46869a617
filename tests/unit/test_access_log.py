"""JSON logging keeps uvicorn's access-log choice: off stays off, on is rerouted to JSON."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import uvicorn

from app.observability import logs

NAMES = ("uvicorn", "uvicorn.error", "uvicorn.access", "")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    saved = {
        name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate)
        for name in NAMES
    }
    level = logging.getLogger().level
    yield
    for name, (handlers, propagate) in saved.items():
        logging.getLogger(name).handlers[:] = handlers
        logging.getLogger(name).propagate = propagate
    logging.getLogger().setLevel(level)


async def app(scope, receive, send):  # pragma: no cover - never served
    """A placeholder ASGI app for uvicorn's config."""


def test_access_log_off_stays_off_after_json_logging_is_configured():
    """`reminders serve` passes access_log=False: no access record is produced afterwards."""
    uvicorn.Config(app, access_log=False).configure_logging()
    logs.configure_logging("INFO")
    assert not logging.getLogger("uvicorn.access").hasHandlers()
    assert logging.getLogger("uvicorn.error").hasHandlers()  # errors still reach the JSON log


def test_access_log_on_is_rerouted_to_the_json_handler():
    """With uvicorn's default access log, its records go through the root JSON handler."""
    uvicorn.Config(app).configure_logging()
    logs.configure_logging("INFO")
    access = logging.getLogger("uvicorn.access")
    assert access.handlers == []
    assert access.propagate
    assert access.hasHandlers()
