"""Google Pub/Sub (``REMINDERS_QUEUE=pubsub``, the ``[gcp]`` extra): REST API client,
publisher, push format (OIDC or a token parameter), setup and check."""

from ..google_settings import GooglePushSettings
from ..kind import QueueKind, lazy
from .settings import PubSubSettings

KIND = QueueKind(
    name="pubsub",
    max_delay="0 (published when due)",
    publisher=lazy(__name__, "build", "build_pubsub_publisher"),
    push_format=lazy(__name__, "build", "build_pubsub_push_format"),
    setup=lazy(__name__, "build", "setup_topics"),
    check=lazy(__name__, "check", "check_subscriptions"),
    settings=(PubSubSettings, GooglePushSettings),
    settings_checks=(lazy(__name__, "settings_checks", "check_pubsub_settings"),),
    extra="gcp",
    extra_modules=("google.auth",),
)
