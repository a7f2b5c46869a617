"""Run the ``reminders`` command in process, off the event loop (it runs its own)."""

from __future__ import annotations

import anyio
import pytest
from click.testing import Result
from typer.testing import CliRunner

from app.cli import cli
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET


async def invoke(*args: str) -> Result:
    """``reminders *args`` with the environment as it is now."""
    runner = CliRunner()
    return await anyio.to_thread.run_sync(lambda: runner.invoke(cli, list(args)))


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, str]:
    """Put a deployment's variables into the environment for the test."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def deployment_env(database_url: str, **extra: str) -> dict[str, str]:
    """REMINDERS_* settings pointed at a test database (memory queue unless overridden)."""
    return {
        "REMINDERS_DATABASE_URL": database_url,
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_QUEUE": "memory",
        **extra,
    }
