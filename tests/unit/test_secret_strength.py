"""Outside dev mode every credential we choose is long, random-looking, distinct and never a
published dev value; each refusal is one line naming the variable, never the value."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr, ValidationError

from app.settings import Settings
from app.settings.secrets import DEV_CHANNEL_SECRETS, DEV_PUSH_SECRET, dev_token

STRONG = {
    "database_url": "postgresql://reminders@db.internal/reminders",
    "push_secrets": [SecretStr("9c1e5b2d8f4a6c0e2b4d7f3a1c5e9b2d")],
    "cron_token": SecretStr("4d2e8a6c0f9b1d3e5a7c9f1b3e5a7c9d"),
    "api_token": SecretStr("88a1c3e5f7b9d0a2c4e6f8b1d3f5a7c9"),
    "admin_token": SecretStr("0c5f2a4c6e8b1d3f5a7c9e0b2d4f6a8c"),
    "metrics_token": SecretStr("6e0a2c4e8b1d3f5a7c9e1b3d5f7a9c0e"),
}


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
            monkeypatch.delenv(name)


def refusal(**overrides: object) -> list[str]:
    """The lines of the refusal of these settings."""
    with pytest.raises(ValidationError) as caught:
        Settings(**{**STRONG, **overrides})
    return [line for line in str(caught.value).splitlines() if "REMINDERS_" in line]


def test_strong_distinct_secrets_are_accepted():
    """The baseline: 32 random characters each, all different."""
    assert not Settings(**STRONG).dev_mode


@pytest.mark.parametrize("name", ["api_token", "admin_token", "cron_token", "metrics_token"])
def test_a_one_character_token_is_refused_naming_it_not_its_value(name):
    """A token shorter than 32 bytes stops startup in one line naming the variable."""
    [line] = [line for line in refusal(**{name: SecretStr("Q")}) if "shorter" in line]
    assert f"REMINDERS_{name.upper()}" in line and "32" in line
    assert "'Q'" not in line and '"Q"' not in line


def test_an_api_token_equal_to_the_admin_token_is_refused_naming_both():
    """Two credentials with one value: either leaks the other's power."""
    [line] = refusal(api_token=STRONG["admin_token"])
    assert "REMINDERS_API_TOKEN" in line and "REMINDERS_ADMIN_TOKEN" in line
    assert STRONG["admin_token"].get_secret_value() not in line


def test_a_push_secret_equal_to_a_token_is_refused():
    """Push secrets are credentials too (the queue's)."""
    [line] = refusal(push_secrets=[STRONG["cron_token"]])
    assert "REMINDERS_CRON_TOKEN" in line and "REMINDERS_PUSH_SECRETS" in line


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("api_token", dev_token("api_token")),
        ("admin_token", dev_token("admin_token")),
        ("cron_token", "dev-cron-token-but-made-long-enough-9f3b"),
        ("push_secrets", DEV_PUSH_SECRET),
        ("webhook_signing_secret", DEV_CHANNEL_SECRETS["webhook_signing_secret"]),
        ("unsubscribe_secret", DEV_CHANNEL_SECRETS["unsubscribe_secret"]),
    ],
)
def test_published_dev_values_are_refused(name, value):
    """The well-known dev-mode values never pass outside dev mode, however long."""
    secret = [SecretStr(value)] if name == "push_secrets" else SecretStr(value)
    lines = refusal(**{name: secret})
    assert any("dev-mode value" in line for line in lines), lines


@pytest.mark.parametrize("value", ["a" * 40, "abcdefghij" * 4, "0123456789" * 4])
def test_a_long_but_repetitive_secret_is_refused(value):
    """Length alone is not enough: a value that repeats itself is refused."""
    [line] = refusal(api_token=SecretStr(value))
    assert "REMINDERS_API_TOKEN does not look random" in line


def test_dev_mode_takes_the_published_values():
    """Dev mode fills and accepts the well-known values (loopback only, see `serve`)."""
    settings = Settings(dev_mode=True)
    assert settings.api_token.get_secret_value() == dev_token("api_token")
