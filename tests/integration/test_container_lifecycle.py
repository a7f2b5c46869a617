"""One container lifecycle: the lifespan and every command close the HTTP pool and the engine."""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import event
from typer.testing import CliRunner

import app.container as container_module
from app.cli import cli
from app.container import Container, open_container
from app.main import create_app
from tests.conftest import make_settings
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

pytestmark = pytest.mark.anyio


class Watched:
    """A built container whose HTTP pool is open (as after a provider's first send) and
    whose engine reports its disposal."""

    def __init__(self, container: Container) -> None:
        self.session = container.http.session() if container.http else None
        self.disposals = 0
        event.listen(container.engine.sync_engine, "engine_disposed", self._disposed)

    def _disposed(self, _engine: object) -> None:
        self.disposals += 1


@pytest.fixture
def built(monkeypatch) -> list[Watched]:
    """Every container the code under test builds, watched (the real one, not a fake)."""
    seen: list[Watched] = []
    real = container_module.build_container

    def build_and_watch(*args, **kwargs):
        container = real(*args, **kwargs)
        seen.append(Watched(container))
        return container

    monkeypatch.setattr(container_module, "build_container", build_and_watch)
    return seen


@pytest.fixture
def command_env(clean_database_url, tmp_path, monkeypatch):
    """The environment a deployment would give the CLI, pointed at the test database."""
    env = {
        "REMINDERS_DATABASE_URL": clean_database_url,
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_OUTBOX_DIR": str(tmp_path / "outbox"),
        "REMINDERS_QUEUE": "memory",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("queue", "command"),
    [
        ("memory", ["sweep"]),
        ("memory", ["dead-letters", "list"]),
        ("memory", ["dead-letters", "stuck"]),
        ("embedded", ["dispatch", "--once"]),
    ],
)
async def test_a_command_closes_the_http_pool_and_the_engine(
    built, command_env, monkeypatch, queue, command
):
    """Each command opens one container and, when it ends, its HTTP pool and engine are closed."""
    monkeypatch.setenv("REMINDERS_QUEUE", queue)
    result = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, command))
    assert result.exit_code == 0, result.output
    [watched] = built
    assert watched.session is not None and watched.session.closed
    assert watched.disposals == 1


async def test_the_lifespan_closes_the_http_pool_and_the_engine(
    built, clean_database_url, tmp_path
):
    """The app's lifespan opens the container at startup and closes all of it at shutdown."""
    app = create_app(make_settings(clean_database_url, tmp_path))
    async with app.router.lifespan_context(app):
        [watched] = built
        assert not watched.session.closed and watched.disposals == 0
    assert watched.session.closed
    assert watched.disposals == 1


async def test_closing_twice_closes_once(built, clean_database_url, tmp_path):
    """``aclose`` after the block ends does nothing more: everything is closed exactly once."""
    async with open_container(make_settings(clean_database_url, tmp_path)) as container:
        pass
    await container.aclose()
    [watched] = built
    assert watched.session.closed and watched.disposals == 1
