"""The checks the settings run for the pubsub queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


def check_pubsub_settings(settings: Settings) -> None:
    """Refuse Pub/Sub settings that cannot work or would let it give up before us."""
    if "pubsub" not in settings.queue_kinds_in_use:
        return
    pubsub = settings.pubsub
    if not pubsub.project:
        raise ValueError("REMINDERS_PUBSUB_PROJECT is required for the pubsub queue")
    if pubsub.max_delivery_attempts <= settings.max_attempts:
        raise ValueError(
            "REMINDERS_PUBSUB_MAX_DELIVERY_ATTEMPTS must exceed REMINDERS_MAX_ATTEMPTS: "
            "our busy answers count as Pub/Sub delivery attempts"
        )
    if pubsub.ack_deadline_seconds <= settings.provider_timeout_seconds:
        raise ValueError(
            "REMINDERS_PUBSUB_ACK_DEADLINE_SECONDS must exceed "
            "REMINDERS_PROVIDER_TIMEOUT_SECONDS, or Pub/Sub redelivers during a send"
        )
