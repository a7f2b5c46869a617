"""The environment a deployment gives a ``reminders`` command, pointed at test resources."""

from __future__ import annotations

from app.settings import Settings
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET


def service_env(settings: Settings) -> dict[str, str]:
    """Database, push secrets, tokens and outbox of ``settings`` as REMINDERS_* variables."""
    return {
        "REMINDERS_DATABASE_URL": settings.database_url,
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_OUTBOX_DIR": str(settings.outbox_dir),
    }
