"""The checks the settings run for the sqs queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


def check_sqs_settings(settings: Settings) -> None:
    """SQS must keep redelivering until our own ledger gives up (and records a dead letter)."""
    in_use = "sqs" in settings.queue_kinds_in_use
    if in_use and settings.sqs.max_receive_count <= settings.max_attempts:
        raise ValueError(
            "REMINDERS_SQS_MAX_RECEIVE_COUNT must be above REMINDERS_MAX_ATTEMPTS "
            "so SQS never moves a message to its DLQ that our ledger would still retry"
        )
