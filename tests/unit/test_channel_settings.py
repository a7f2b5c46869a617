"""Channel settings: each real provider refuses to start without its own secret."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from app.adapters.channels.email_api import EmailApiProvider
from app.adapters.channels.registry import build_chains, build_providers
from app.adapters.channels.smtp import SmtpProvider
from app.adapters.channels.webhook import WebhookProvider
from app.domain.errors import ConfigError
from app.settings import ConfigurationProblems, Settings, explain, read_settings
from tests.conftest import REAL_MAIL, make_settings

URL = "sqlite+aiosqlite:///unused.db"


@pytest.mark.parametrize(
    ("overrides", "missing"),
    [
        ({"email_provider": "smtp", **REAL_MAIL}, "REMINDERS_UNSUBSCRIBE_SECRET"),
        (
            {
                **REAL_MAIL,
                "email_provider": "email_api",
                "unsubscribe_secret": SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
            },
            "REMINDERS_EMAIL_API_KEY",
        ),
        ({"webhook_provider": "webhook"}, "REMINDERS_WEBHOOK_SIGNING_SECRET"),
        (
            {"webhook_provider": "webhook", "webhook_signing_secret": SecretStr("changeme")},
            "REMINDERS_WEBHOOK_SIGNING_SECRET",
        ),
    ],
)
def test_real_providers_require_their_secrets(tmp_path: Path, overrides, missing):
    """Outside dev mode a provider without its secret is a startup error naming the variable."""
    with pytest.raises(ValidationError, match=missing):
        make_settings(URL, tmp_path, **overrides)


def test_dev_mode_fills_channel_secrets(tmp_path: Path):
    """Dev mode works with one command: webhook signing and unsubscribe links get dev values."""
    settings = make_settings(URL, tmp_path, dev_mode=True, webhook_provider="webhook")
    assert settings.unsubscribe_secret.get_secret_value()
    assert settings.webhook_signing_secret.get_secret_value().startswith("whsec_")


def test_registry_builds_the_configured_providers(tmp_path: Path):
    """REMINDERS_EMAIL_PROVIDER / REMINDERS_WEBHOOK_PROVIDER choose the modules."""
    common = {
        **REAL_MAIL,
        "unsubscribe_secret": SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
        "webhook_provider": "webhook",
        "webhook_signing_secret": SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    }
    smtp = build_providers(make_settings(URL, tmp_path, email_provider="smtp", **common))
    assert isinstance(smtp["email"], SmtpProvider)
    assert isinstance(smtp["webhook"], WebhookProvider)
    api = build_providers(
        make_settings(
            URL, tmp_path, email_provider="email_api", email_api_key=SecretStr("k"), **common
        )
    )
    assert isinstance(api["email"], EmailApiProvider)
    assert api["email"].http is api["webhook"].http  # one shared pool


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("REMINDERS_EMAIL_PROVIDER", "webhook"),
        ("REMINDERS_WEBHOOK_PROVIDER", "smtp"),
        ("REMINDERS_EMAIL_PROVIDER", "smpt"),
    ],
)
def test_a_provider_the_channel_does_not_have_is_refused(monkeypatch, variable, value):
    """An email provider cannot serve webhooks and vice versa, and a misspelt provider is
    no provider: the settings refuse them in one line naming the variable (before anything
    is built, where the container's refusal was a traceback)."""
    for name in [n for n in os.environ if n.startswith("REMINDERS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("REMINDERS_DEV_MODE", "1")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(Settings)
    [line] = explain(caught.value)
    assert line.startswith(f"configuration error: {variable}: input should be 'outbox'"), line


def test_email_providers_lists_the_failover_order_and_each_needs_its_secret(
    tmp_path: Path, monkeypatch
):
    """REMINDERS_EMAIL_PROVIDERS=email_api,smtp: both built, in order; each provider's own
    secret is required; a name given twice is refused."""
    monkeypatch.setenv("REMINDERS_EMAIL_PROVIDERS", "email_api, smtp")
    with pytest.raises(ValidationError, match="REMINDERS_EMAIL_API_KEY"):
        make_settings(
            URL,
            tmp_path,
            **REAL_MAIL,
            unsubscribe_secret=SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
        )
    settings = make_settings(
        URL, tmp_path, **REAL_MAIL,
        unsubscribe_secret=SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
        email_api_key=SecretStr("re_key_5d1c7a9e3b2f4086"),
    )  # fmt: skip
    chains = build_chains(settings)
    assert [type(p) for p in chains["email"]] == [EmailApiProvider, SmtpProvider]
    assert isinstance(build_providers(settings)["email"], EmailApiProvider)  # the first
    monkeypatch.setenv("REMINDERS_EMAIL_PROVIDERS", "smtp,smtp")
    with pytest.raises(ValidationError, match="names a provider twice"):
        make_settings(
            URL,
            tmp_path,
            **REAL_MAIL,
            unsubscribe_secret=SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
        )


def test_a_failover_list_naming_a_webhook_provider_is_refused(tmp_path: Path):
    """Every name in the list must be an email provider."""
    settings = make_settings(
        URL, tmp_path, **REAL_MAIL, email_providers=["smtp", "webhook"],
        unsubscribe_secret=SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
    )  # fmt: skip
    with pytest.raises(ConfigError, match="REMINDERS_EMAIL_PROVIDERS: 'webhook' is not a provider"):
        build_chains(settings)
