"""Secret values: the one list of placeholders refused outside dev mode, and dev-mode defaults."""

from __future__ import annotations

from pydantic import SecretStr

from app.settings.problems import MissingSecrets

# Values that mean "somebody forgot to set this"; refused outside dev mode, for every secret.
PLACEHOLDER_SECRETS = frozenset(
    {
        "",
        "changethis",
        "changeme",
        "change-me",
        "secret",
        "password",
        "placeholder",
        "xxx",
        "ifr_xxx",
        "todo",
    }
)
# The bearer tokens of the API, the admin page and the cron route.
SECRET_FIELDS = ("cron_token", "api_token", "admin_token")
# Well-known dev-mode values (``reminders serve`` prints them in dev mode).
DEV_PUSH_SECRET = "dev-push-secret"


def dev_token(name: str) -> str:
    """The well-known dev-mode value of one of ``SECRET_FIELDS``: ``dev-api-token``, …"""
    return f"dev-{name.replace('_', '-')}"


# A Standard Webhooks secret is base64 after "whsec_".
DEV_CHANNEL_SECRETS = {
    "unsubscribe_secret": "dev-unsubscribe-secret",
    "webhook_signing_secret": "whsec_ZGV2LXdlYmhvb2stc2lnbmluZy1zZWNyZXQ=",
}


def is_placeholder(secret: SecretStr) -> bool:
    """True when the secret is empty or a well-known placeholder (case and spaces ignored)."""
    return secret.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS


def refuse_placeholder(env_name: str, secret: SecretStr, *, context: str = "") -> None:
    """Raise naming ``env_name`` when the secret is empty or a placeholder."""
    if is_placeholder(secret):
        raise MissingSecrets([env_name], context)
