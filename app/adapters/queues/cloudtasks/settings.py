"""Cloud Tasks settings (prefix ``REMINDERS_CLOUDTASKS_``), nested in ``Settings.cloudtasks``:
where the queues live and what ``reminders setup`` writes. Push checks:
``REMINDERS_GOOGLE_PUSH_*`` (``app/adapters/queues/google_settings.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from app.settings import Settings


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


def check_cloudtasks_settings(settings: Settings) -> None:
    """Refuse Cloud Tasks settings that cannot work or would let it give up before us."""
    if "cloudtasks" not in settings.queue_kinds_in_use:
        return
    cloudtasks = settings.cloudtasks
    if not cloudtasks.project or not cloudtasks.location:
        raise ValueError(
            "REMINDERS_CLOUDTASKS_PROJECT and REMINDERS_CLOUDTASKS_LOCATION are required "
            "for the cloudtasks queue"
        )
    if 0 <= cloudtasks.max_attempts <= settings.max_attempts:
        raise ValueError(
            "REMINDERS_CLOUDTASKS_MAX_ATTEMPTS must exceed REMINDERS_MAX_ATTEMPTS (or be "
            "-1, unlimited): Cloud Tasks deletes a task after its last attempt"
        )
