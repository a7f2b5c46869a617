"""Configuration problems are gathered and told in plain words; database URLs are mapped to
the async drivers the service uses."""

import os
import re
from pathlib import Path

import pytest

from app.settings import (
    DEFAULT_SQLITE_URL,
    SETTING_VARIABLES,
    ConfigurationProblems,
    DatabaseSettings,
    Settings,
    explain,
    read_settings,
)
from app.settings.database import normalize_database_url
from app.settings.environment import unknown_variables


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    """Each test sees only the variables it sets."""
    for name in list(os.environ):
        if name.upper().startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
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
    monkeypatch.setenv("REMINDERS_DATABASE_URL", "postgresql://reminders@db.internal/reminders")
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


# Configuration that cannot silently go wrong (issue 23, point 1).
REAL_SECRETS = {
    "REMINDERS_API_TOKEN": "a9f3c7e1b5d20864f2a6c0e8b4d1f7a3",
    "REMINDERS_CRON_TOKEN": "c2e6a0f4b8d1379e5c3a7f1b9d0e6a2c",
    "REMINDERS_ADMIN_TOKEN": "e4b8d2f6a0c3591b7e5c9a3d1f2b8c4e",
    "REMINDERS_PUSH_SECRETS": "f6d0b4a8c2e5713d9b7f1c5e3a4d0e6b",
    "REMINDERS_METRICS_TOKEN": "b1f5d9a3e7c0246a8f4b2d6c0e9a5f3d",
}


def _set(monkeypatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def _lines(cls: type = Settings) -> list[str]:
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(cls)
    return explain(caught.value)


@pytest.mark.parametrize("cls", [Settings, DatabaseSettings])
def test_a_misspelt_variable_is_refused_naming_the_nearest_setting(cls, monkeypatch, tmp_path):
    """REMINDERS_DATABSE_URL used to run on ./reminders.db without a word (the file existed):
    now one line names the setting meant, for serve and migrate alike."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reminders.db").touch()
    _set(
        monkeypatch,
        REMINDERS_DEV_MODE="1",
        REMINDERS_DATABSE_URL="postgresql://reminders:pw@db.internal/reminders",
    )
    assert _lines(cls) == [
        "configuration error: REMINDERS_DATABSE_URL is not a setting: "
        "did you mean REMINDERS_DATABASE_URL?"
    ]


def test_every_unknown_variable_is_one_line_beside_the_other_problems(monkeypatch):
    """Two unknown names (one near a setting, one near none) and a bad value: one run names
    all three, one line each; lower-case spellings count (pydantic reads them too)."""
    _set(
        monkeypatch,
        REMINDERS_DEV_MODE="1",
        REMINDERS_EMAIL_FORM="reminders@example.com",
        reminders_colour="blue",
        REMINDERS_LEASE_SECONDS="soon",
    )
    lines = _lines()
    assert lines[0] == "configuration errors:" and len(lines) == 4, lines
    assert "  REMINDERS_EMAIL_FORM is not a setting: did you mean REMINDERS_EMAIL_FROM?" in lines
    assert any(line.startswith("  reminders_colour is not a setting: remove it") for line in lines)
    assert any(line.startswith("  REMINDERS_LEASE_SECONDS: ") for line in lines)


def test_the_names_the_projects_own_scripts_read_are_allowed(monkeypatch):
    """REMINDERS_* names that are no setting but that the container entrypoint, CI, the
    tests and the benchmarks read are in the one allow-list, so they never stop a process."""
    _set(
        monkeypatch,
        REMINDERS_DEV_MODE="1",
        REMINDERS_MIGRATE_ON_START="true",
        REMINDERS_CI="1",
        REMINDERS_TEST_PG_ADMIN_URL="postgresql://postgres@127.0.0.1/postgres",
        REMINDERS_BENCH_PG_ADMIN_URL="postgresql://postgres@127.0.0.1/postgres",
    )
    assert read_settings(Settings).dev_mode


def test_every_reminders_name_the_repository_reads_is_a_setting_or_allowed():
    """Scripts, tests and benchmarks that read a REMINDERS_* variable (os.environ, getenv,
    shell ``$NAME``) may not use a name the unknown-variable check refuses."""
    root = Path(__file__).resolve().parents[2]
    files = [root / "Dockerfile", *(root / "docker").rglob("*"), *(root / ".ci").rglob("*")]
    files += [*(root / "tests").rglob("*.py"), *(root / "bench").rglob("*.py")]
    read = re.compile(
        r"""(?:environ\.get\(|environ\[|getenv\()\s*["'](REMINDERS_[A-Z0-9_]+)["']"""
        r"|\$\{?(REMINDERS_[A-Z0-9_]+)"
    )
    names = {
        name
        for path in files
        if path.is_file()
        for match in read.findall(path.read_text(encoding="utf-8", errors="replace"))
        for name in match
        if name
    }
    assert {"REMINDERS_CI", "REMINDERS_MIGRATE_ON_START", "REMINDERS_TEST_DB"} <= names
    assert unknown_variables(dict.fromkeys(names, ""), SETTING_VARIABLES) == []


def test_outside_dev_mode_the_database_must_be_named(monkeypatch, tmp_path):
    """No REMINDERS_DATABASE_URL outside dev mode: one line, for migrate and serve alike;
    nothing falls back to ./reminders.db."""
    monkeypatch.chdir(tmp_path)
    _set(monkeypatch, **REAL_SECRETS)
    for cls in (Settings, DatabaseSettings):
        [line] = _lines(cls)
        assert line.startswith("configuration error: REMINDERS_DATABASE_URL is not set: "), line
        assert "REMINDERS_DEV_MODE=1" in line


def test_dev_mode_uses_the_local_sqlite_file(monkeypatch):
    """Dev mode (the README's quick start) keeps ./reminders.db as its database."""
    _set(monkeypatch, REMINDERS_DEV_MODE="1")
    assert read_settings(DatabaseSettings).database_url == DEFAULT_SQLITE_URL
    assert read_settings(Settings).database_url == DEFAULT_SQLITE_URL


@pytest.mark.parametrize("provider", ["smtp", "email_api", "postmark", "sendgrid", "ses"])
def test_real_mail_refuses_the_local_defaults(provider, monkeypatch):
    """Outside dev mode a real email provider refuses the loopback public URL (unsubscribe
    links) and a From address at localhost, one line each naming the variable."""
    _set(
        monkeypatch,
        **REAL_SECRETS,
        REMINDERS_DATABASE_URL="postgresql://reminders@db.internal/reminders",
        REMINDERS_EMAIL_PROVIDER=provider,
        REMINDERS_UNSUBSCRIBE_SECRET="d3a7c1f5b9e2486a0c4e8b2f6d1a5c9e",
        REMINDERS_EMAIL_API_KEY="re_key",
        REMINDERS_POSTMARK_SERVER_TOKEN="pm-token",
        REMINDERS_SENDGRID_API_KEY="SG.key",
    )
    lines = _lines()
    assert lines[0] == "configuration errors:" and len(lines) == 3, lines
    assert lines[1].startswith("  REMINDERS_PUBLIC_BASE_URL=http://127.0.0.1:8000 is this")
    assert lines[2].startswith("  REMINDERS_EMAIL_FROM=reminders@localhost is an address at")
    _set(
        monkeypatch,
        REMINDERS_PUBLIC_BASE_URL="https://reminders.example.com",
        REMINDERS_EMAIL_FROM="Reminders <reminders@example.com>",
    )
    assert read_settings(Settings).email_provider == provider


@pytest.mark.parametrize(
    ("url", "sender"),
    [
        ("http://localhost:8000", "reminders@localhost.localdomain"),
        ("http://[::1]:8000", "reminders@app.localhost"),
        ("https://127.0.0.53", "Reminders <reminders@127.0.0.1>"),
    ],
)
def test_every_loopback_spelling_is_refused_with_real_mail(url, sender, monkeypatch):
    """localhost, *.localhost, ::1 and 127.0.0.0/8 are all this machine."""
    _set(
        monkeypatch,
        **REAL_SECRETS,
        REMINDERS_DATABASE_URL="postgresql://reminders@db.internal/reminders",
        REMINDERS_EMAIL_PROVIDER="smtp",
        REMINDERS_UNSUBSCRIBE_SECRET="d3a7c1f5b9e2486a0c4e8b2f6d1a5c9e",
        REMINDERS_PUBLIC_BASE_URL=url,
        REMINDERS_EMAIL_FROM=sender,
    )
    text = "\n".join(_lines())
    assert "REMINDERS_PUBLIC_BASE_URL" in text and "REMINDERS_EMAIL_FROM" in text


def test_local_defaults_pass_with_the_outbox_and_in_dev_mode(monkeypatch):
    """The outbox writes files (its links and From are never delivered), and dev mode is
    local use: neither refuses the defaults."""
    _set(monkeypatch, REMINDERS_DEV_MODE="1", REMINDERS_EMAIL_PROVIDER="smtp")
    assert read_settings(Settings).public_base_url == "http://127.0.0.1:8000"
    monkeypatch.delenv("REMINDERS_DEV_MODE")
    monkeypatch.delenv("REMINDERS_EMAIL_PROVIDER")
    _set(
        monkeypatch,
        **REAL_SECRETS,
        REMINDERS_DATABASE_URL="postgresql://reminders@db.internal/reminders",
    )
    settings = read_settings(Settings)
    assert settings.email_from == "reminders@localhost"
    assert settings.local_only_warnings() == []


def test_a_channel_left_on_the_outbox_beside_a_real_provider_is_warned_about(monkeypatch):
    """Webhooks sent for real while email is written to files: a warning line naming the
    variable (a deployment may not use email at all, so it is not refused)."""
    _set(
        monkeypatch,
        **REAL_SECRETS,
        REMINDERS_DATABASE_URL="postgresql://reminders@db.internal/reminders",
        REMINDERS_WEBHOOK_PROVIDER="webhook",
        REMINDERS_WEBHOOK_SIGNING_SECRET="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    )
    [warning] = read_settings(Settings).local_only_warnings()
    assert warning.startswith("REMINDERS_EMAIL_PROVIDER=outbox: email messages are written")
    assert warning.endswith("while REMINDERS_WEBHOOK_PROVIDER=webhook sends for real")
