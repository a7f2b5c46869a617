"""Embedded-queue configuration: the default queue, its settings' checks, the push address."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.adapters.queues.embedded.settings import EmbeddedQueueSettings
from app.cli.embedded import local_base_url
from app.services.background import runs_in_serve
from app.settings import Settings


def test_the_embedded_queue_is_the_default_and_serve_runs_its_dispatcher(monkeypatch):
    """Without REMINDERS_QUEUE the service uses the embedded queue and serve dispatches."""
    monkeypatch.delenv("REMINDERS_QUEUE", raising=False)
    settings = Settings(dev_mode=True)
    assert settings.queue == "embedded"
    assert runs_in_serve(settings)
    assert not runs_in_serve(Settings(dev_mode=True, queue="memory"))


def test_settings_come_from_the_environment_with_their_prefix(monkeypatch):
    """REMINDERS_EMBEDDED_* configures the dispatcher."""
    monkeypatch.setenv("REMINDERS_EMBEDDED_CONCURRENCY", "3")
    monkeypatch.setenv("REMINDERS_EMBEDDED_DISPATCH_IN_SERVE", "false")
    settings = Settings(dev_mode=True)
    assert settings.embedded.concurrency == 3
    assert not runs_in_serve(settings)


def test_a_visibility_timeout_not_above_the_push_timeout_is_refused():
    """A push still running when its claim expires would be delivered twice at once."""
    embedded = EmbeddedQueueSettings(push_timeout_seconds=100, visibility_timeout_seconds=100)
    with pytest.raises(ValidationError, match="VISIBILITY_TIMEOUT"):
        Settings(dev_mode=True, embedded=embedded)


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8000"),
        ("0.0.0.0", "http://127.0.0.1:8000"),
        ("::", "http://[::1]:8000"),
        ("::1", "http://[::1]:8000"),
        ("reminders.internal", "http://reminders.internal:8000"),
    ],
)
def test_serve_pushes_to_the_address_it_binds(host, url):
    """A wildcard bind is reached over loopback; IPv6 literals are bracketed."""
    assert local_base_url(host, 8000) == url


def test_embedded_max_retries_must_exceed_our_attempt_ceiling(tmp_path):
    """A queue that gives up before the ledger does would drop retries silently: refused."""
    with pytest.raises(ValueError, match="REMINDERS_EMBEDDED_MAX_RETRIES"):
        Settings(
            dev_mode=True,
            queue="embedded",
            max_attempts=8,
            embedded={"max_retries": 8},
            outbox_dir=tmp_path,
        )
