"""The environment a deployment gives a ``reminders`` command, pointed at test resources."""

from __future__ import annotations

from app.settings import Settings
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET


def service_env(settings: Settings) -> dict[str, str]:
    """Database, push secrets, tokens and outbox of ``settings`` as REMINDERS_* variables."""
    return {
        "REMINDERS_DATABASE_URL": settings.database_url,
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token",
        "REMINDERS_CRON_TOKEN": "test-cron-token",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token",
        "REMINDERS_OUTBOX_DIR": str(settings.outbox_dir),
    }
