"""The checks the settings run for the infrai queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.settings.secrets import refuse_placeholder

if TYPE_CHECKING:
    from app.settings import Settings


def check_infrai_settings(settings: Settings) -> None:
    """Refuse Infrai settings that would lose or double-process messages."""
    infrai, delivery_seconds = settings.infrai, settings.delivery_seconds
    if infrai.visibility_timeout_seconds is not None and (
        infrai.visibility_timeout_seconds <= delivery_seconds
    ):
        raise ValueError(
            "REMINDERS_INFRAI_VISIBILITY_TIMEOUT_SECONDS must exceed "
            f"REMINDERS_PROVIDER_TIMEOUT_SECONDS + REMINDERS_LEASE_SECONDS, {delivery_seconds:g} "
            "s: a pulled message must not reappear while its send may still be finalizing"
        )
    if "infrai" not in settings.queue_kinds_in_use and settings.queue != "infrai":
        return
    if infrai.queue_max_retries <= settings.max_attempts:
        raise ValueError(
            "REMINDERS_INFRAI_QUEUE_MAX_RETRIES must exceed REMINDERS_MAX_ATTEMPTS: our own "
            "dead-letter set must catch exhausted sends before Infrai's DLQ does"
        )
    if not settings.dev_mode:
        refuse_placeholder(
            "REMINDERS_INFRAI_API_KEY", infrai.api_key, context="REMINDERS_QUEUE=infrai"
        )
