"""The checks the settings run for the qstash queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


def check_qstash_settings(settings: Settings) -> None:
    """A publish token and a signing key are set."""
    if "qstash" not in settings.queue_kinds_in_use:
        return
    qstash = settings.qstash
    if not qstash.token.get_secret_value():
        raise ValueError("REMINDERS_QSTASH_TOKEN is required with the qstash queue")
    if not qstash.signing_keys():
        raise ValueError("REMINDERS_QSTASH_CURRENT_SIGNING_KEY is required")
