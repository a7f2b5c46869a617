"""Upstash QStash (``REMINDERS_QUEUE=qstash``): publisher and push format (a JWT naming
each queue's own URL, so one push format per queue)."""

from ..kind import QueueKind, lazy
from .settings import QStashSettings

KIND = QueueKind(
    name="qstash",
    max_delay="REMINDERS_QSTASH_MAX_DELAY_SECONDS (the plan's: 7 days on the free plan)",
    publisher=lazy(__name__, "build", "build_qstash_publisher"),
    push_format_for=lazy(__name__, "build", "build_qstash_push_format_for"),
    settings=(QStashSettings,),
    settings_checks=(lazy(__name__, "settings_checks", "check_qstash_settings"),),
)
