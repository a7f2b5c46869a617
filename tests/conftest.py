"""Shared fixtures: a real database per run (SQLite file or a fresh PostgreSQL database),
emptied before each test; an injected clock and random source; the app over ASGI.

Choose the backend with ``pytest --db sqlite`` (default) or ``pytest --db postgresql``
(``REMINDERS_TEST_PG_ADMIN_URL`` points at a server where databases can be created;
default ``postgresql://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import text

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.container import Container, build_container
from app.db.engine import create_engine
from app.db.migrations import upgrade_to_head
from app.main import create_app
from app.settings import Settings
from tests.support.clock import FakeClock
from tests.support.providers import ScriptedProvider
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

pytest_plugins = [
    "tests.support.infrai_fixtures",
    "tests.support.google_emulators",
    "tests.support.aws_fixtures",
    "tests.support.rabbit_fixtures",
    "tests.support.sqs_fixtures",
    "tests.support.log_capture",
]

API_TOKEN = "test-api-token-5f0c9a1e7b3d42c8a6e0f1"
CRON_TOKEN = "test-cron-token-9b2e4d6f8a0c1e3b5d7f90"
ADMIN_TOKEN = "test-admin-token-c4a8e2f6b0d3917a5e2c4b"
METRICS_TOKEN = "test-metrics-token-6a3f1c9e7d5b2a8f0e4c"
PG_ADMIN_URL = os.environ.get(
    "REMINDERS_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--db",
        choices=("sqlite", "postgresql"),
        default=os.environ.get("REMINDERS_TEST_DB", "sqlite"),
        help="database backend for the suite (default sqlite)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    # Mark coroutine tests before anyio's plugin sees them, so its backend parametrization
    # composes with @pytest.mark.parametrize (marking later loses the parameters).
    if collector.funcnamefilter(name) and inspect.iscoroutinefunction(obj):
        pytest.mark.anyio(obj)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def db_backend(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--db"))


async def _create_pg_database(name: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def _drop_pg_database(name: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _pg_url(name: str) -> str:
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def database_url(db_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database for this test run, removed afterwards."""
    if db_backend == "sqlite":
        path = tmp_path_factory.mktemp("db") / "reminders.db"
        url = f"sqlite+aiosqlite:///{path}"
        upgrade_to_head(url)
        yield url
        return
    name = f"rr_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_create_pg_database(name))
    url = _pg_url(name)
    try:
        upgrade_to_head(url)
        yield url
    finally:
        asyncio.run(_drop_pg_database(name))


async def empty_all_tables(database_url: str) -> None:
    """Delete every row of every table but alembic_version."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                names = (
                    await conn.execute(
                        text(
                            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                            "AND tablename <> 'alembic_version'"
                        )
                    )
                ).scalars()
                joined = ", ".join(f'"{name}"' for name in names)
                if joined:
                    await conn.execute(text(f"TRUNCATE {joined} RESTART IDENTITY CASCADE"))
            else:
                names = (
                    await conn.execute(
                        text(
                            "SELECT name FROM sqlite_master WHERE type = 'table' "
                            "AND name NOT LIKE 'sqlite_%' AND name <> 'alembic_version'"
                        )
                    )
                ).scalars()
                await conn.execute(text("PRAGMA defer_foreign_keys = ON"))
                for name in list(names):
                    await conn.execute(text(f'DELETE FROM "{name}"'))
    finally:
        await engine.dispose()


@pytest.fixture
async def clean_database_url(database_url: str) -> str:
    """The run's database, emptied for this test."""
    await empty_all_tables(database_url)
    return database_url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rand() -> random.Random:
    return random.Random(1234)


# What a deployment with a real email provider sets: outside dev mode the local defaults
# (a loopback public URL, a From at localhost) are refused with real mail.
REAL_MAIL: dict[str, str] = {
    "public_base_url": "https://reminders.example.com",
    "email_from": "reminders@example.com",
}
REAL_MAIL_ENV = {f"REMINDERS_{name.upper()}": value for name, value in REAL_MAIL.items()}


def make_settings(database_url: str, tmp_path: Path, **overrides: object) -> Settings:
    """Settings as a production deployment would have them, pointed at test resources."""
    values: dict[str, object] = {
        "database_url": database_url,
        "push_secrets": [SecretStr(PUSH_SECRET), SecretStr(NEXT_PUSH_SECRET)],
        "cron_token": SecretStr(CRON_TOKEN),
        "api_token": SecretStr(API_TOKEN),
        "admin_token": SecretStr(ADMIN_TOKEN),
        "metrics_token": SecretStr(METRICS_TOKEN),
        "outbox_dir": tmp_path / "outbox",
        "outbox_fsync": False,
        "lease_seconds": 60,
        "provider_timeout_seconds": 20,
        "max_attempts": 3,
        "backoff_base_seconds": 10,
        "backoff_cap_seconds": 600,
        # Suites that send many wrong credentials on purpose; the throttle's own tests
        # (tests/api/test_auth_throttle.py) set small budgets.
        "auth_failures_per_client": 100_000,
        "auth_failures_global": 100_000,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(clean_database_url: str, tmp_path: Path) -> Settings:
    return make_settings(clean_database_url, tmp_path)


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def publisher(clock: FakeClock) -> MemoryPublisher:
    return MemoryPublisher(clock=clock)


@pytest.fixture
async def container(
    settings: Settings,
    clock: FakeClock,
    rand: random.Random,
    provider: ScriptedProvider,
    publisher: MemoryPublisher,
) -> AsyncIterator[Container]:
    """The service's real wiring with an injected clock, random source, publisher and provider."""
    built = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    built.receiver = dataclasses.replace(
        built.receiver, providers={"email": provider, "webhook": provider}
    )
    yield built
    await built.aclose()  # the engine, the shared HTTP pool (OIDC key fetches), the publisher


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the app in-process (ASGI)."""
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http
