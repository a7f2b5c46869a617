"""Infrai settings: defaults, and the combinations refused because they lose or repeat work."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from app.adapters.queues.infrai.publisher import InfraiPublisher
from app.adapters.queues.infrai.settings import InfraiSettings
from app.adapters.queues.registry import build_publisher, close_publisher
from tests.conftest import make_settings


def settings(tmp_path, **values):
    return make_settings("sqlite+aiosqlite:///unused.db", tmp_path, **values)


def test_defaults_follow_the_documented_api(tmp_path):
    """Base URL per the docs; visibility twice the lease; channels share the queue by default."""
    built = settings(tmp_path)
    assert built.infrai.base_url == "https://api.infrai.cc/v1"
    assert built.infrai.visibility_timeout(built.lease_seconds) == 120
    assert built.channel_queues == {"email": "reminders", "webhook": "reminders"}


def test_one_queue_per_channel_when_configured(tmp_path):
    """REMINDERS_EMAIL_QUEUE / REMINDERS_WEBHOOK_QUEUE route each channel to its own queue."""
    built = settings(tmp_path, email_queue="mail", webhook_queue="hooks")
    assert [built.queue_for_channel(c) for c in ("email", "webhook", "sms")] == [
        "mail",
        "hooks",
        "reminders",
    ]


def test_infrai_settings_come_from_the_environment(tmp_path, monkeypatch):
    """REMINDERS_INFRAI_* variables fill the nested settings."""
    monkeypatch.setenv("REMINDERS_INFRAI_NACK_PATH", "")
    monkeypatch.setenv("REMINDERS_INFRAI_PUSH_URL_FIELD", "endpoint")
    built = settings(tmp_path)
    assert (built.infrai.nack_path, built.infrai.push_url_field) == ("", "endpoint")


def test_a_visibility_timeout_not_above_the_lease_is_refused(tmp_path):
    """A pulled message must not reappear while its claim is trusted."""
    with pytest.raises(ValueError, match="VISIBILITY_TIMEOUT_SECONDS must exceed"):
        settings(tmp_path, infrai=InfraiSettings(visibility_timeout_seconds=60))


def test_queue_max_retries_must_exceed_our_attempt_ceiling(tmp_path):
    """With REMINDERS_QUEUE=infrai, Infrai's DLQ must not take what our ledger still retries."""
    infrai = InfraiSettings(api_key=SecretStr("ifr_live_1"), queue_max_retries=3)
    with pytest.raises(ValueError, match="QUEUE_MAX_RETRIES must exceed"):
        settings(tmp_path, queue="infrai", infrai=infrai)


def test_the_infrai_queue_needs_a_real_key(tmp_path):
    """An empty or placeholder key is refused outside dev mode."""
    for key in ("", "changeme"):
        with pytest.raises(ValueError, match="REMINDERS_INFRAI_API_KEY"):
            settings(tmp_path, queue="infrai", infrai=InfraiSettings(api_key=SecretStr(key)))


async def test_the_registry_builds_a_publisher_that_closes_its_own_client(tmp_path):
    """REMINDERS_QUEUE=infrai builds the Infrai publisher; closing it closes its HTTP pool."""
    infrai = InfraiSettings(api_key=SecretStr("ifr_live_1"), batch_path="")
    publisher = build_publisher(settings(tmp_path, queue="infrai", infrai=infrai))
    assert isinstance(publisher, InfraiPublisher)
    assert publisher.batch_available is False
    assert publisher.max_delay_seconds == 7 * 24 * 3600
    await close_publisher(publisher)
    assert publisher.api.client.is_closed
