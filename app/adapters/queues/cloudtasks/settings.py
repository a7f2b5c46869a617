"""Cloud Tasks settings (prefix ``REMINDERS_CLOUDTASKS_``), nested in ``Settings.cloudtasks``:
where the queues live and what ``reminders setup`` writes. Push checks:
``REMINDERS_GOOGLE_PUSH_*`` (``app/adapters/queues/google_settings.py``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CloudTasksSettings(BaseSettings):
    """Where Cloud Tasks queues live and their retry configuration (``REMINDERS_CLOUDTASKS_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_CLOUDTASKS_", extra="ignore")

    project: str = ""
    location: str = ""
    # What `reminders setup --queue cloudtasks` writes on each queue.
    max_attempts: int = Field(default=100, ge=-1)
    min_backoff_seconds: int = Field(default=10, ge=1)
    max_backoff_seconds: int = Field(default=3600, ge=1)
    max_doublings: int = Field(default=16, ge=0)
