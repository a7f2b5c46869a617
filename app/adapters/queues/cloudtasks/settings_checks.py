"""The checks the settings run for the cloudtasks queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


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
