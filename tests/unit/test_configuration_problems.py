"""Configuration problems are gathered and told in plain words; database URLs are mapped to
the async drivers the service uses."""

import os

import pytest

from app.settings import ConfigurationProblems, DatabaseSettings, Settings, explain, read_settings
from app.settings.database import normalize_database_url


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    """Each test sees only the variables it sets."""
    for name in list(os.environ):
        if name.startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("postgres://u:p@db.example:5432/app", "postgresql+asyncpg://u:p@db.example:5432/app"),
        ("postgresql://u@h/app?sslmode=require", "postgresql+asyncpg://u@h/app?ssl=require"),
        ("postgresql+asyncpg://u@h/app", "postgresql+asyncpg://u@h/app"),
        ("sqlite:///./reminders.db", "sqlite+aiosqlite:///./reminders.db"),
        ("sqlite+aiosqlite:////data/r.db", "sqlite+aiosqlite:////data/r.db"),
    ],
)
def test_hosting_provider_urls_become_async_driver_urls(given, used):
    """postgres:// and postgresql:// (sslmode too) reach asyncpg; sqlite:// reaches aiosqlite."""
    assert normalize_database_url(given) == used


@pytest.mark.parametrize("url", ["mysql://u@h/db", "postgresql+psycopg://u@h/db", "reminders.db"])
def test_a_url_no_installed_driver_serves_is_refused_in_plain_words(url, monkeypatch):
    """Another database or driver: one line naming the variable and what works."""
    monkeypatch.setenv("REMINDERS_DATABASE_URL", url)
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(DatabaseSettings)
    [line] = explain(caught.value)
    assert line.startswith("configuration error: REMINDERS_DATABASE_URL")
    assert "Value error" not in line


def test_every_missing_secret_is_named_in_one_line_with_the_dev_mode_hint(monkeypatch):
    """No secrets at all: one line names the five, the next says how to run locally, the
    last how to open /metrics without a token instead."""
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(Settings)
    assert set(caught.value.missing_secrets) == {
        "REMINDERS_API_TOKEN",
        "REMINDERS_CRON_TOKEN",
        "REMINDERS_ADMIN_TOKEN",
        "REMINDERS_PUSH_SECRETS",
        "REMINDERS_METRICS_TOKEN",
    }
    first, hint, metrics = explain(caught.value)
    assert first.startswith("configuration error: ") and "REMINDERS_PUSH_SECRETS" in first
    assert "REMINDERS_DEV_MODE=1" in hint
    assert "REMINDERS_METRICS_PUBLIC=true" in metrics


def test_field_errors_and_cross_checks_are_reported_together(monkeypatch):
    """A value that does not parse does not hide the checks that need the other values."""
    monkeypatch.setenv("REMINDERS_LEASE_SECONDS", "soon")
    monkeypatch.setenv("REMINDERS_EMAIL_PROVIDER", "email_api")
    monkeypatch.setenv("REMINDERS_EMBEDDED_MAX_RETRIES", "3")
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(Settings)
    lines = explain(caught.value)
    assert lines[0] == "configuration errors:"
    text = "\n".join(lines)
    assert "REMINDERS_LEASE_SECONDS: input should be a valid number" in text
    assert "REMINDERS_EMBEDDED_MAX_RETRIES must be above REMINDERS_MAX_ATTEMPTS" in text
    assert "REMINDERS_EMAIL_API_KEY" in text and "REMINDERS_UNSUBSCRIBE_SECRET" in text


def test_dev_mode_needs_no_secret(monkeypatch):
    """REMINDERS_DEV_MODE=1 alone is a working configuration."""
    monkeypatch.setenv("REMINDERS_DEV_MODE", "1")
    assert read_settings(Settings).api_token.get_secret_value() == "dev-api-token"
