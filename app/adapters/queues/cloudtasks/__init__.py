"""Google Cloud Tasks (``REMINDERS_QUEUE=cloudtasks``, the ``[gcp]`` extra): publisher
(gRPC client), push format (OIDC or our HMAC header), setup and check."""

from ..google_settings import GooglePushSettings
from ..kind import QueueKind, lazy
from .settings import CloudTasksSettings

KIND = QueueKind(
    name="cloudtasks",
    max_delay="30 days",
    publisher=lazy(__name__, "build", "build_cloudtasks_publisher"),
    push_format=lazy(__name__, "build", "build_cloudtasks_push_format"),
    setup=lazy(__name__, "build", "setup_queues"),
    check=lazy(__name__, "check", "check_queues"),
    settings=(CloudTasksSettings, GooglePushSettings),
    settings_checks=(lazy(__name__, "settings_checks", "check_cloudtasks_settings"),),
    extra="gcp",
    extra_modules=("google.auth", "google.cloud.tasks_v2", "grpc"),
)
