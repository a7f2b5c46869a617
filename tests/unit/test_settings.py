"""Settings: secrets refused outside dev mode (naming the variable), dev fills, sane timeouts."""

import os

import pytest
from pydantic import SecretStr, ValidationError

from app.settings import SECRET_FIELDS, Settings

GOOD = {
    "database_url": "postgresql://reminders@db.internal/reminders",
    "push_secrets": [
        SecretStr("push-current-7f3a9c1e5b2d8f4a6c0e2b4d"),
        SecretStr("push-next-91bc3e7a5f1d9b2c6e8a0f4d"),
    ],
    "cron_token": SecretStr("cron-token-4d2e8a6c0f9b1d3e5a7c9f1b"),
    "api_token": SecretStr("api-token-88a1c3e5f7b9d0a2c4e6f8b1"),
    "admin_token": SecretStr("admin-token-0c5f2a4c6e8b1d3f5a7c9e0b"),
    "metrics_token": SecretStr("metrics-token-6e0a2c4e8b1d3f5a7c9e1b3d"),
}


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    """Each test sees only the values it passes (the developer's shell must not leak in)."""
    for name in list(os.environ):
        if name.startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
            monkeypatch.delenv(name)


def build(**overrides) -> Settings:
    return Settings(**{**GOOD, **overrides})


def test_production_settings_with_real_secrets_are_accepted():
    """Non-placeholder secrets outside dev mode build a settings object."""
    settings = build()
    assert not settings.dev_mode
    assert [s.get_secret_value() for s in settings.push_secrets] == [
        "push-current-7f3a9c1e5b2d8f4a6c0e2b4d",
        "push-next-91bc3e7a5f1d9b2c6e8a0f4d",
    ]


@pytest.mark.parametrize("name", SECRET_FIELDS)
@pytest.mark.parametrize("value", ["", "   ", "changeme", "CHANGEME", " secret ", "changethis"])
def test_empty_or_placeholder_tokens_are_refused_naming_the_variable(name, value):
    """Outside dev mode an empty or placeholder token stops startup, naming REMINDERS_<NAME>."""
    with pytest.raises(ValidationError, match=f"REMINDERS_{name.upper()}"):
        build(**{name: SecretStr(value)})


def test_missing_token_is_refused():
    """A token left unset is as bad as an empty one."""
    values = {k: v for k, v in GOOD.items() if k != "api_token"}
    with pytest.raises(ValidationError, match="REMINDERS_API_TOKEN"):
        Settings(**values)


@pytest.mark.parametrize(
    "secrets", [[], [SecretStr("changeme")], [SecretStr("push-ok-1234"), SecretStr("")]]
)
def test_empty_or_placeholder_push_secrets_are_refused(secrets):
    """No push secret, or a placeholder among them, is refused naming REMINDERS_PUSH_SECRETS."""
    with pytest.raises(ValidationError, match="REMINDERS_PUSH_SECRETS"):
        build(push_secrets=secrets)


def test_error_never_echoes_a_real_secret():
    """The refusal names the variable, not the other secrets' values."""
    with pytest.raises(ValidationError) as caught:
        build(cron_token=SecretStr("changeme"))
    text = str(caught.value)
    for value in (
        "api-token-88a1c3e5f7b9d0a2c4e6f8b1",
        "admin-token-0c5f2a4c6e8b1d3f5a7c9e0b",
        "push-current-7f3a9c1e5b2d8f4a6c0e2b4d",
    ):
        assert value not in text


def test_secrets_are_not_shown_in_repr():
    """Printing or logging the settings does not reveal a secret."""
    shown = repr(build()) + str(build().model_dump())
    for value in (
        "cron-token-4d2e8a6c0f9b1d3e5a7c9f1b",
        "api-token-88a1c3e5f7b9d0a2c4e6f8b1",
        "admin-token-0c5f2a4c6e8b1d3f5a7c9e0b",
        "push-next-91bc3e7a5f1d9b2c6e8a0f4d",
    ):
        assert value not in shown


def test_dev_mode_fills_missing_secrets():
    """Dev mode starts with nothing configured, using well-known dev values."""
    settings = Settings(dev_mode=True)
    for name in SECRET_FIELDS:
        assert getattr(settings, name).get_secret_value().startswith("dev-")
    assert settings.push_secrets
    assert all(s.get_secret_value() for s in settings.push_secrets)


def test_dev_mode_keeps_secrets_that_were_given():
    """Dev mode only fills the gaps; a configured secret stays."""
    settings = Settings(dev_mode=True, api_token=SecretStr("mine-123456"))
    assert settings.api_token.get_secret_value() == "mine-123456"
    assert settings.cron_token.get_secret_value().startswith("dev-")


@pytest.mark.parametrize("timeout", [60.0, 90.0])
def test_provider_timeout_must_be_below_the_lease(timeout):
    """A provider timeout equal to or above the lease is refused, naming both variables."""
    with pytest.raises(ValidationError, match="REMINDERS_PROVIDER_TIMEOUT_SECONDS") as caught:
        build(lease_seconds=60, provider_timeout_seconds=timeout)
    assert "REMINDERS_LEASE_SECONDS" in str(caught.value)


def test_provider_timeout_below_the_lease_is_accepted():
    """53 s of provider time under a 60 s lease is fine (its 6 s safety margin left)."""
    assert build(lease_seconds=60, provider_timeout_seconds=53).provider_timeout_seconds == 53


def test_timeout_rule_applies_in_dev_mode_too():
    """Dev mode relaxes secrets, not the lease safety rule."""
    with pytest.raises(ValidationError, match="REMINDERS_PROVIDER_TIMEOUT_SECONDS"):
        Settings(dev_mode=True, lease_seconds=10, provider_timeout_seconds=20)


def test_settings_come_from_the_environment(monkeypatch):
    """REMINDERS_* variables configure the service; push secrets split on commas, in order."""
    monkeypatch.setenv(
        "REMINDERS_PUSH_SECRETS",
        " push-current-7f3a9c1e5b2d8f4a6c0e2b4d , push-next-91bc3e7a5f1d9b2c6e8a0f4d,",
    )
    monkeypatch.setenv("REMINDERS_CRON_TOKEN", "cron-token-4d2e8a6c0f9b1d3e5a7c9f1b")
    monkeypatch.setenv("REMINDERS_API_TOKEN", "api-token-88a1c3e5f7b9d0a2c4e6f8b1")
    monkeypatch.setenv("REMINDERS_ADMIN_TOKEN", "admin-token-0c5f2a4c6e8b1d3f5a7c9e0b")
    monkeypatch.setenv("REMINDERS_METRICS_TOKEN", "metrics-token-6e0a2c4e8b1d3f5a7c9e1b3d")
    monkeypatch.setenv("REMINDERS_DATABASE_URL", "postgresql://reminders@db.internal/reminders")
    monkeypatch.setenv("REMINDERS_LEASE_SECONDS", "90")
    monkeypatch.setenv("REMINDERS_MAX_ATTEMPTS", "5")
    settings = Settings()
    assert [s.get_secret_value() for s in settings.push_secrets] == [
        "push-current-7f3a9c1e5b2d8f4a6c0e2b4d",
        "push-next-91bc3e7a5f1d9b2c6e8a0f4d",
    ]
    assert settings.lease_seconds == 90
    assert settings.max_attempts == 5


def test_environment_placeholder_is_refused(monkeypatch):
    """A placeholder that arrives through the environment is refused like any other."""
    monkeypatch.setenv("REMINDERS_PUSH_SECRETS", "changeme")
    monkeypatch.setenv("REMINDERS_CRON_TOKEN", "cron-token-4d2e8a6c0f9b1d3e5a7c9f1b")
    monkeypatch.setenv("REMINDERS_API_TOKEN", "api-token-88a1c3e5f7b9d0a2c4e6f8b1")
    monkeypatch.setenv("REMINDERS_ADMIN_TOKEN", "admin-token-0c5f2a4c6e8b1d3f5a7c9e0b")
    with pytest.raises(ValidationError, match="REMINDERS_PUSH_SECRETS"):
        Settings()


def test_backoff_policy_follows_the_settings():
    """The retry policy uses the configured base and cap."""
    policy = build(backoff_base_seconds=5, backoff_cap_seconds=120).backoff
    assert (policy.base_seconds, policy.cap_seconds) == (5, 120)
