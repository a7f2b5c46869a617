"""Pub/Sub settings (prefix ``REMINDERS_PUBSUB_``), nested in ``Settings.pubsub``: where
the topics live and the push subscriptions ``reminders setup`` writes. Push checks:
``REMINDERS_GOOGLE_PUSH_*`` (``app/adapters/queues/google_settings.py``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class PubSubSettings(BaseSettings):
    """Where Pub/Sub topics live and the subscriptions setup writes (``REMINDERS_PUBSUB_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_PUBSUB_", extra="ignore")

    project: str = ""
    # What `reminders setup --queue pubsub` writes on each push subscription.
    ack_deadline_seconds: int = Field(default=60, ge=10, le=600)
    min_backoff_seconds: int = Field(default=10, ge=0, le=600)  # 0: no retry policy
    max_backoff_seconds: int = Field(default=600, ge=0, le=600)
    max_delivery_attempts: int = Field(default=100, ge=5, le=100)
    dead_letter_suffix: str = "-dead"
    subscription_suffix: str = "-push"
