"""Configuration from the environment (prefix ``REMINDERS_``), built once and passed in."""

from app.settings.core import DEFAULT_SQLITE_URL, Settings
from app.settings.embedded import EmbeddedQueueSettings
from app.settings.infrai import InfraiSettings
from app.settings.secrets import SECRET_FIELDS

__all__ = [
    "DEFAULT_SQLITE_URL",
    "SECRET_FIELDS",
    "EmbeddedQueueSettings",
    "InfraiSettings",
    "Settings",
]
