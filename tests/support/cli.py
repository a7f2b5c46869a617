"""Run the ``reminders`` command in process, off the event loop (it runs its own)."""

from __future__ import annotations

import anyio
import pytest
from click.testing import Result
from typer.testing import CliRunner

from app.cli import cli


async def invoke(*args: str) -> Result:
    """``reminders *args`` with the environment as it is now."""
    runner = CliRunner()
    return await anyio.to_thread.run_sync(lambda: runner.invoke(cli, list(args)))


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, str]:
    """Put a deployment's variables into the environment for the test."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
