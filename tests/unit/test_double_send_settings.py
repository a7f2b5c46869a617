"""Settings under which a message could be sent twice are refused at startup, one line each
(issue 19, point 1): the push and visibility timeouts must outlast a delivery (the provider
timeout, then the finalize, retried for as long as the lease lasts), and the provider
timeout must leave the lease a safety margin."""

import os

import pytest
from pydantic import ValidationError

from app.adapters.queues.infrai.settings import InfraiSettings
from app.settings import ConfigurationProblems, Settings
from tests.unit.test_settings import GOOD


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    """Only the values each test passes."""
    for name in list(os.environ):
        if name.startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
            monkeypatch.delenv(name)


def problems(**values) -> list[str]:
    """The lines a start with these settings is refused with (none: accepted)."""
    try:
        Settings(**{**GOOD, **values})
    except ValidationError as error:
        [problem] = [item["ctx"]["error"] for item in error.errors()]
        assert isinstance(problem, ConfigurationProblems)
        return list(problem.problems)
    return []


def test_the_defaults_cannot_send_twice():
    """The default push (90 s) and visibility (120 s) timeouts outlast a delivery (80 s),
    and follow a longer lease."""
    settings = Settings(**GOOD)
    assert (settings.delivery_seconds, settings.embedded_push_timeout) == (80, 90)
    assert settings.embedded_visibility_timeout == 120
    assert Settings(**GOOD, lease_seconds=90).embedded_push_timeout == 120


def test_a_push_timeout_not_above_provider_timeout_plus_finalize_budget_is_refused():
    """Before: a 30 s push timeout with a 30 s finalize budget cancelled finalizes (the drill
    sent 8 + 8 twice); now the start names the fix."""
    lines = problems(
        lease_seconds=6, provider_timeout_seconds=3,
        embedded={"push_timeout_seconds": 7, "visibility_timeout_seconds": 8},
    )  # fmt: skip
    [line] = lines
    assert line.startswith("REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS must exceed")
    assert "9 s" in line and "\n" not in line


def test_an_infrai_visibility_timeout_not_above_a_delivery_is_refused():
    """A pulled message reappearing while its send may still be finalizing is refused."""
    [line] = problems(infrai=InfraiSettings(visibility_timeout_seconds=70))
    assert line.startswith("REMINDERS_INFRAI_VISIBILITY_TIMEOUT_SECONDS must exceed")


def test_a_provider_timeout_leaving_the_lease_no_margin_is_refused():
    """The lease must outlast the provider call plus its safety margin (a tenth, >= 1 s)."""
    [line] = problems(lease_seconds=10, provider_timeout_seconds=9.5)
    assert line.startswith("REMINDERS_PROVIDER_TIMEOUT_SECONDS plus a 1 s safety margin")


def test_a_pull_visibility_within_the_lease_is_refused():
    """A pulled message must stay hidden while its claim is trusted: 60 s with the 60 s lease
    is refused in one line; 61 s, and 0 (twice the lease), are accepted."""
    from app.settings.worker import WorkerSettings

    [line] = problems(worker=WorkerSettings(visibility_timeout_seconds=60))
    assert "REMINDERS_WORKER_VISIBILITY_TIMEOUT_SECONDS must exceed REMINDERS_LEASE_SECONDS" in line
    assert problems(worker=WorkerSettings(visibility_timeout_seconds=61)) == []
    assert problems(worker=WorkerSettings(visibility_timeout_seconds=0)) == []
