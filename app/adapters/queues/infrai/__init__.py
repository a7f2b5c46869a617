"""Infrai over plain HTTP (``REMINDERS_QUEUE=infrai``): the publisher (``publisher``), the
API client (``api``), the push format, the pull consumer, and the setup (``setup``) and
check (``check``, ``discovery``) steps, run through ``tools``."""

from ..kind import QueueKind, lazy
from .settings import InfraiSettings

KIND = QueueKind(
    name="infrai",
    max_delay="7 days",
    publisher=lazy(__name__, "build", "build_publisher"),
    push_format=lazy(__name__, "build", "build_infrai_push_format"),
    consumer=lazy(__name__, "build", "build_consumer"),
    worker_knobs=lazy(__name__, "build", "worker_knobs"),
    setup=lazy(__name__, "tools", "setup_infrai"),
    check=lazy(__name__, "tools", "check_infrai"),
    settings=(InfraiSettings,),
    settings_checks=(lazy(__name__, "settings_checks", "check_infrai_settings"),),
)
