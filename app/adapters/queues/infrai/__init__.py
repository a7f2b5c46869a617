"""Infrai over plain HTTP (``REMINDERS_QUEUE=infrai``): the publisher (``publisher``), the
API client (``api``), the push format, the pull consumer, and the ``setup-infrai``
(``setup``) and ``reminders check`` (``check``, ``discovery``) tools, which the CLI runs
itself (they have options of their own: a dry run, a recorded discovery file)."""

from ..kind import QueueKind, lazy
from .settings import InfraiSettings

KIND = QueueKind(
    name="infrai",
    max_delay="7 days",
    publisher=lazy(__name__, "build", "build_publisher"),
    push_format=lazy(__name__, "build", "build_infrai_push_format"),
    consumer=lazy(__name__, "build", "build_consumer"),
    worker_knobs=lazy(__name__, "build", "worker_knobs"),
    settings=(InfraiSettings,),
    settings_checks=(lazy(__name__, "settings_checks", "check_infrai_settings"),),
)
