"""Secret values: the one list of placeholders refused outside dev mode, and dev-mode defaults."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

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
# Every secret a deployment chooses itself (REMINDERS_PUSH_SECRETS too), held to
# ``secret_weakness`` outside dev mode; provider-issued keys (Infrai, QStash, SMTP) are not.
CHOSEN_SECRETS = (*SECRET_FIELDS, "metrics_token", "unsubscribe_secret", "webhook_signing_secret")
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


# Outside dev mode every credential we choose (tokens, push and signing secrets) must be at
# least this long and look random: a 1-character token, a token equal to another one, or a
# published dev value was accepted before (issue 19), and nothing throttled guessing then.
MIN_SECRET_BYTES = 32
GENERATE = "e.g. `openssl rand -hex 32`"
_DEV_VALUES = frozenset({DEV_PUSH_SECRET, *DEV_CHANNEL_SECRETS.values()})


def secret_weakness(value: str) -> str | None:
    """Why ``value`` is no acceptable secret (None: it is): a dev value, too short, or
    visibly not random (repeats itself, few distinct characters)."""
    if value.strip().lower().startswith("dev-") or value in _DEV_VALUES:
        return "is a published dev-mode value"
    encoded = value.encode()
    if len(encoded) < MIN_SECRET_BYTES:
        return f"is shorter than {MIN_SECRET_BYTES} bytes"
    # Random text barely compresses; "aaaa…" or "abcabc…" compresses to a fraction.
    if len(set(value)) < 10 or len(zlib.compress(encoded, 9)) < 0.75 * len(encoded):
        return "does not look random (it repeats itself)"
    return None


def strength_checks(named: Sequence[tuple[str, str]]) -> list[Callable[[], None]]:
    """One check per weak secret and one per set of equal ones, each raising a ValueError of
    one line naming the variables (never the values)."""
    checks: list[Callable[[], None]] = []
    for name, value in named:
        weakness = secret_weakness(value)
        if weakness is not None:
            checks.append(
                _refusal(
                    f"{name} {weakness}: use at least {MIN_SECRET_BYTES} random characters "
                    f"({GENERATE})"
                )
            )
    by_value: dict[str, list[str]] = {}
    for name, value in named:
        by_value.setdefault(value, []).append(name)
    for names in by_value.values():
        if len(names) > 1:
            checks.append(
                _refusal(f"{' and '.join(names)} are the same value: give each credential its own")
            )
    return checks


def _refusal(message: str) -> Callable[[], None]:
    def refuse() -> None:
        raise ValueError(message)

    return refuse


def is_placeholder(secret: SecretStr) -> bool:
    """True when the secret is empty or a well-known placeholder (case and spaces ignored)."""
    return secret.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS


def refuse_placeholder(env_name: str, secret: SecretStr, *, context: str = "") -> None:
    """Raise naming ``env_name`` when the secret is empty or a placeholder."""
    if is_placeholder(secret):
        raise MissingSecrets([env_name], context)
