"""The checks the settings run for the sns queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


def check_sns_settings(settings: Settings) -> None:
    """Every SNS queue has a topic, and a region is known."""
    if "sns" not in settings.queue_kinds_in_use:
        return
    sns = settings.sns
    missing = [q for q in settings.queues_of_kind("sns") if q not in sns.topic_arns]
    if missing:
        raise ValueError(f"REMINDERS_SNS_TOPIC_ARNS has no topic for queue(s) {missing}")
    if not sns.region_name():
        raise ValueError("REMINDERS_SNS_REGION is empty and the topic ARNs name none")
