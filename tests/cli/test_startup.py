"""A fresh install, given each common mistake, answers in one or two lines and exits 1.

Each test runs the real ``reminders`` command in a clean environment (no REMINDERS_* but
what the test sets), as a new user would from a shell or a container.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli.serve_workers import default_workers, usable_cores
from app.db.migrations import head_revisions
from tests.conftest import PG_ADMIN_URL, _create_pg_database, _drop_pg_database

REMINDERS = str(Path(sys.executable).parent / "reminders")
SECRETS = {
    "REMINDERS_API_TOKEN": "t-api-1-9f3b7d1e5a2c8064b9d1f3a5c7",
    "REMINDERS_CRON_TOKEN": "t-cron-1-3d7f1b5e9a2c6048d1f3b5a7c9",
    "REMINDERS_ADMIN_TOKEN": "t-admin-1-7b1f5d9a3e2c8064f3b5d7a9c1",
    "REMINDERS_PUSH_SECRETS": "t-push-1-5a9e3c7f1b2d6084a5c7e9b1d3",
    "REMINDERS_METRICS_TOKEN": "t-metrics-1-1c5a9e3f7b2d6084c7e9a1b3d5",
}


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    return {**base, "COLUMNS": "200", "REMINDERS_OUTBOX_DIR": str(tmp_path / "outbox"), **values}


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [REMINDERS, *args],
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _pg_url(name: str, scheme: str = "postgresql") -> str:
    return f"{scheme}://{PG_ADMIN_URL.split('://', 1)[1].rsplit('/', 1)[0]}/{name}"


@pytest.fixture
def empty_pg_database() -> Iterator[str]:
    """A PostgreSQL database that exists and has no schema; its name."""
    name = f"rr_start_{uuid.uuid4().hex[:10]}"
    asyncio.run(_create_pg_database(name))
    try:
        yield name
    finally:
        asyncio.run(_drop_pg_database(name))


def test_no_secrets_names_every_missing_one_and_dev_mode(tmp_path):
    """serve without secrets: exit 1, three lines — all five variables at once, the local way
    out, the way to open /metrics instead — and no pydantic boilerplate."""
    result = _run(
        tmp_path, "serve", "--port", str(_free_port()), REMINDERS_DATABASE_URL="sqlite:///r.db"
    )
    assert result.returncode == 1
    lines = _lines(result.stderr)
    assert len(lines) == 3, result.stderr
    for name in SECRETS:
        assert name in lines[0]
    assert "REMINDERS_DEV_MODE=1" in lines[1]
    assert "REMINDERS_METRICS_PUBLIC=true" in lines[2]
    assert "Value error" not in result.stderr and "pydantic" not in result.stderr
    assert result.stdout == ""


def test_every_configuration_problem_is_reported_at_once(tmp_path):
    """A value that does not parse, a contradiction and missing secrets: one run names all."""
    result = _run(
        tmp_path,
        "serve",
        REMINDERS_LEASE_SECONDS="soon",
        REMINDERS_PROVIDER_TIMEOUT_SECONDS="90",
    )
    assert result.returncode == 1
    text = result.stderr
    assert "REMINDERS_LEASE_SECONDS" in text and "REMINDERS_PROVIDER_TIMEOUT_SECONDS" in text
    assert "REMINDERS_API_TOKEN" in text and "REMINDERS_DEV_MODE=1" in text
    assert "Traceback" not in text and "validation error" not in text


def test_migrate_needs_no_secret(tmp_path):
    """migrate needs only the database URL (sqlite:// without a driver is accepted)."""
    result = _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///fresh.db")
    assert result.returncode == 0, result.stderr
    tables = sqlite3.connect(tmp_path / "fresh.db").execute(
        "SELECT version_num FROM alembic_version"
    )
    assert tables.fetchall()


def test_serve_refuses_an_unmigrated_database(tmp_path):
    """A database without the schema: exit 1 before serving, one line naming the fix."""
    sqlite3.connect(tmp_path / "empty.db").close()
    result = _run(
        tmp_path,
        "serve",
        "--port",
        str(_free_port()),
        REMINDERS_DATABASE_URL="sqlite+aiosqlite:///empty.db",
        **SECRETS,
    )
    assert result.returncode == 1
    assert _lines(result.stderr) == [
        "reminders: the database has no schema yet: run `reminders migrate`"
    ]
    assert "Application startup" not in result.stdout


def test_serve_refuses_a_database_that_does_not_exist(tmp_path, db_backend):
    """No database: exit 1, one line saying to create it (SQLite: migrate creates the file)."""
    if db_backend == "sqlite":
        url, fix = "sqlite+aiosqlite:///missing.db", "run `reminders migrate`"
    else:
        name = f"rr_missing_{uuid.uuid4().hex[:10]}"
        url, fix = _pg_url(name), f"create it (createdb {name}"
    result = _run(
        tmp_path, "serve", "--port", str(_free_port()), REMINDERS_DATABASE_URL=url, **SECRETS
    )
    assert result.returncode == 1
    [line] = _lines(result.stderr)
    assert "does not exist" in line and fix in line
    assert not (tmp_path / "missing.db").exists()  # nothing created on the way


def test_serve_refuses_a_database_it_cannot_reach(tmp_path):
    """Nothing listens on the port: exit 1, one line with host, port and what to check."""
    port = _free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/reminders"
    result = _run(
        tmp_path, "serve", "--port", str(_free_port()), REMINDERS_DATABASE_URL=url, **SECRETS
    )
    assert result.returncode == 1
    [line] = _lines(result.stderr)
    assert f"cannot connect to the database at 127.0.0.1:{port}" in line
    assert "REMINDERS_DATABASE_URL" in line


@pytest.mark.slow
def test_postgresql_urls_as_hosting_providers_give_them_work(tmp_path, empty_pg_database):
    """postgresql:// to migrate and postgres:// to serve: both reach asyncpg; ready."""
    migrated = _run(tmp_path, "migrate", REMINDERS_DATABASE_URL=_pg_url(empty_pg_database))
    assert migrated.returncode == 0, migrated.stderr
    port = _free_port()
    env = _env(tmp_path, REMINDERS_DATABASE_URL=_pg_url(empty_pg_database, "postgres"), **SECRETS)
    server = _serve(tmp_path, env, port)
    try:
        ready = _poll(f"http://127.0.0.1:{port}/readyz", server)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "psycopg" not in stderr and "Traceback" not in stderr


def test_a_port_in_use_fails_before_any_background_work(tmp_path):
    """Another process holds the port: exit 1, one line; no sweep or dispatch ran first."""
    assert _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///db.sqlite").returncode == 0
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = _run(
            tmp_path,
            "serve",
            "--port",
            str(port),
            REMINDERS_DATABASE_URL="sqlite:///db.sqlite",
            **SECRETS,
        )
    assert result.returncode == 1
    [line] = _lines(result.stderr)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line
    assert result.stdout == ""  # not a log line: nothing started, nothing swept


@pytest.mark.slow
def test_serve_waits_for_the_database_when_told_to(tmp_path):
    """REMINDERS_DATABASE_WAIT_SECONDS: serve says what it waits for, and starts once the
    database is migrated meanwhile (a container started beside its migration job)."""
    port = _free_port()
    env = _env(
        tmp_path,
        REMINDERS_DATABASE_URL="sqlite:///later.db",
        REMINDERS_DATABASE_WAIT_SECONDS="60",
        **SECRETS,
    )
    server = _serve(tmp_path, env, port)
    try:
        assert server.stderr is not None
        waiting = server.stderr.readline()
        assert waiting.startswith("reminders: waiting for the database: ")
        assert "does not exist" in waiting
        assert (
            _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///later.db").returncode == 0
        )
        assert _poll(f"http://127.0.0.1:{port}/readyz", server).status_code == 200
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.slow
def test_dev_mode_prints_its_urls_and_the_tokens_it_filled_in(tmp_path):
    """Dev mode: /docs, /admin and the dev tokens on stdout; a token you set is not shown.
    REMINDERS_LOG_FORMAT=console: the log lines that follow are for people, not JSON."""
    port = _free_port()
    env = _env(
        tmp_path,
        REMINDERS_DEV_MODE="1",
        REMINDERS_ADMIN_TOKEN="my-own-admin-token",
        REMINDERS_LOG_FORMAT="console",
    )
    server = _serve(tmp_path, env, port)
    try:
        assert server.stdout is not None
        banner = [server.stdout.readline() for _ in range(6)]
        first_log = server.stdout.readline()
    finally:
        server.terminate()
        server.communicate(timeout=30)
    text = "".join(banner)
    assert f"http://127.0.0.1:{port}/docs" in text and f"http://127.0.0.1:{port}/admin" in text
    assert "dev-api-token" in text and "dev-cron-token" in text and "dev-push-secret" in text
    assert "my-own-admin-token" not in text and "dev-admin-token" not in text
    # SQLite: one worker, said in the first log line, for people (not JSON)
    assert "serving with 1 worker process" in first_log and not first_log.startswith("{")


def _serve(tmp_path: Path, env: dict[str, str], port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [REMINDERS, "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _poll(url: str, server: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"serve exited: {server.communicate()}")
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within 60 s")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_dev_mode_refuses_a_host_beyond_loopback(tmp_path, host):
    """Dev mode's tokens are published: serving them on a public interface is refused in one
    line naming --host, before anything binds or starts."""
    result = _run(
        tmp_path,
        "serve",
        "--host",
        host,
        REMINDERS_DEV_MODE="1",
        REMINDERS_DATABASE_URL=f"sqlite:///{tmp_path / 'dev.db'}",
    )
    assert result.returncode == 1
    [line] = _lines(result.stderr)
    assert "REMINDERS_DEV_MODE=1 listens on loopback only" in line and f"--host {host}" in line
    assert "dev-api-token" not in result.stdout + result.stderr


# Configuration that cannot silently go wrong (issue 23, point 1): each refusal one line per
# problem, never a traceback; every process says what it runs on.


def _refusal(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The problems a refused run names, one per line (without the heading line)."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = _lines(result.stderr)
    if lines[0] == "reminders: configuration errors:":
        return [line.removeprefix("reminders:   ") for line in lines[1:]]
    return [line.removeprefix("reminders: configuration error: ") for line in lines]


@pytest.mark.parametrize("command", ["serve", "migrate", "sweep"])
def test_a_misspelt_database_variable_is_refused_beside_the_file_it_would_have_used(
    tmp_path, command
):
    """REMINDERS_DATABSE_URL (misspelt) used to start on ./reminders.db, which exists here;
    now the typo and the missing URL are named, one line each, and nothing runs."""
    assert (
        _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///reminders.db").returncode == 0
    )
    before = (tmp_path / "reminders.db").stat().st_mtime_ns
    result = _run(
        tmp_path,
        command,
        REMINDERS_DATABSE_URL="postgresql://reminders:pw-7c1e@db.internal/reminders",
        **SECRETS,
    )
    problems = _refusal(result)
    assert problems[0] == (
        "REMINDERS_DATABSE_URL is not a setting: did you mean REMINDERS_DATABASE_URL?"
    )
    assert problems[1].startswith("REMINDERS_DATABASE_URL is not set: outside dev mode")
    assert len(problems) == 2 and "pw-7c1e" not in result.stderr
    assert (tmp_path / "reminders.db").stat().st_mtime_ns == before


def test_migrate_outside_dev_mode_needs_the_url(tmp_path):
    """migrate with no URL used to create ./reminders.db and say only `schema at head`:
    refused in one line, and no file appears."""
    [problem] = _refusal(_run(tmp_path, "migrate"))
    assert problem.startswith("REMINDERS_DATABASE_URL is not set: ")
    assert not (tmp_path / "reminders.db").exists()


def test_real_mail_refuses_the_local_defaults_at_startup(tmp_path):
    """SMTP outside dev mode with the loopback public URL and a From at localhost: one line
    each, before serve checks anything else."""
    result = _run(
        tmp_path,
        "serve",
        "--port",
        str(_free_port()),
        REMINDERS_DATABASE_URL="sqlite:///r.db",
        REMINDERS_EMAIL_PROVIDER="smtp",
        REMINDERS_UNSUBSCRIBE_SECRET="d3a7c1f5b9e2486a0c4e8b2f6d1a5c9e",
        **SECRETS,
    )
    public_url, sender = _refusal(result)
    assert public_url.startswith("REMINDERS_PUBLIC_BASE_URL=http://127.0.0.1:8000 is this")
    assert sender.startswith("REMINDERS_EMAIL_FROM=reminders@localhost is an address at")


@pytest.mark.parametrize("command", ["serve", "sweep"])
def test_a_secret_only_the_container_can_check_is_one_line(tmp_path, command):
    """A webhook signing secret the Standard Webhooks library rejects surfaced while the
    container was built: a traceback from uvicorn's lifespan or the command. One line now,
    naming the variable and never the value."""
    assert _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///r.db").returncode == 0
    secret = "whsec_!@#$%^&*(){}[]<>?|~;:,.-_!?#"  # decodes to nothing
    result = _run(
        tmp_path,
        command,
        *(["--port", str(_free_port())] if command == "serve" else []),
        REMINDERS_DATABASE_URL="sqlite:///r.db",
        REMINDERS_WEBHOOK_PROVIDER="webhook",
        REMINDERS_WEBHOOK_SIGNING_SECRET=secret,
        **SECRETS,
    )
    [problem] = _refusal(result)
    assert problem.startswith("REMINDERS_WEBHOOK_SIGNING_SECRET is not a valid Standard Webhooks")
    assert secret not in result.stderr


DEV_MODE_HINT = (
    "reminders: for local use, REMINDERS_DEV_MODE=1 fills every secret with a well-known dev value"
)
# Real mail configured as it must be outside dev mode, so only the provider's problem is left.
REAL_MAIL = {
    "REMINDERS_PUBLIC_BASE_URL": "https://reminders.example.com",
    "REMINDERS_EMAIL_FROM": "reminders@example.com",
    "REMINDERS_UNSUBSCRIBE_SECRET": "d3a7c1f5b9e2486a0c4e8b2f6d1a5c9e",
}


@pytest.mark.parametrize("command", ["serve", "sweep"])
@pytest.mark.parametrize(
    ("provider", "problem", "hint"),
    [
        ("sendgrid", "REMINDERS_SENDGRID_API_KEY is empty or a placeholder", [DEV_MODE_HINT]),
        ("sendgridd", "REMINDERS_EMAIL_PROVIDER: input should be 'outbox', 'smtp', ", []),
    ],
    ids=["settings-missing", "misspelt"],
)
def test_a_provider_misconfigured_is_one_line(tmp_path, command, provider, problem, hint):
    """REMINDERS_EMAIL_PROVIDER=sendgrid without its API key (once ~100 lines of traceback
    inside one log line) and a misspelt provider name: one line naming the setting."""
    assert _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///r.db").returncode == 0
    result = _run(
        tmp_path,
        command,
        *(["--port", str(_free_port())] if command == "serve" else []),
        REMINDERS_DATABASE_URL="sqlite:///r.db",
        REMINDERS_EMAIL_PROVIDER=provider,
        **REAL_MAIL,
        **SECRETS,
    )
    [named, *rest] = _refusal(result)
    assert named.startswith(problem), result.stderr
    assert rest == hint  # a missing secret also points at dev mode, which fills secrets in


def test_tracing_without_its_extra_is_one_line_outside_dev_mode(tmp_path):
    """REMINDERS_OTEL_ENABLED=true on a base install (the OpenTelemetry SDK missing) once
    printed a 139-line traceback: one line naming the extra to install."""
    assert _run(tmp_path, "migrate", REMINDERS_DATABASE_URL="sqlite:///r.db").returncode == 0
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.without_extras", "cli", "serve"],
        env=_env(
            tmp_path,
            PYTHONPATH=str(Path(__file__).resolve().parents[2]),
            REMINDERS_DATABASE_URL="sqlite:///r.db",
            REMINDERS_OTEL_ENABLED="true",
            **SECRETS,
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert _refusal(result) == [
        "REMINDERS_OTEL_ENABLED=true needs: pip install 'reminder-relay[otel]'"
    ]


def _startup_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "reminders.startup" in line]


@pytest.fixture
def database_with_password(tmp_path, db_backend) -> Iterator[tuple[str, str]]:
    """A database URL carrying a password (PostgreSQL trusts local connections, so it is
    accepted and ignored), and the database as the startup line must name it."""
    if db_backend == "sqlite":
        yield "sqlite:///reminders.db", f"sqlite {tmp_path / 'reminders.db'}"
        return
    name = f"rr_start_{uuid.uuid4().hex[:10]}"
    asyncio.run(_create_pg_database(name))
    try:
        url = _pg_url(name).replace("postgres@", "postgres:pw-7c1e5b@", 1)
        yield url, f"postgresql 127.0.0.1:5432/{name}"
    finally:
        asyncio.run(_drop_pg_database(name))


@pytest.mark.slow
def test_every_process_logs_one_startup_line_naming_what_it_runs_on(
    tmp_path, database_with_password
):
    """migrate, sweep, dispatch and serve each log one line: the database (host and name, or
    the SQLite file; never the password), the schema revision, each channel's queue kind
    and the providers. Commands log on stderr (JSON lines off a terminal, as serve logs on
    stdout), so their stdout stays their JSON answer."""
    url, database = database_with_password
    env = {"REMINDERS_DATABASE_URL": url, **SECRETS}
    head = ", ".join(sorted(head_revisions()))
    migrated = _run(tmp_path, "migrate", **env)
    assert migrated.returncode == 0, migrated.stderr
    [line] = _startup_lines(migrated.stderr)
    assert json.loads(line)["event"].startswith(
        f"reminders migrate starting: database {database}, schema "
    )
    assert f"schema at head ({head}) on {database}" in migrated.stdout
    queues = "queues email=embedded/reminders webhook=embedded/reminders"
    for command in (["sweep"], ["dispatch", "--once"]):
        result = _run(tmp_path, *command, **env)
        assert result.returncode == 0, result.stderr
        json.loads(result.stdout)  # nothing but the answer on stdout
        [line] = _startup_lines(result.stderr)
        assert json.loads(line)["event"] == (
            f"reminders {command[0]} starting: database {database}, schema {head} (head); "
            f"{queues}; providers email=outbox webhook=outbox"
        )
        assert "pw-7c1e5b" not in result.stdout + result.stderr
    port = _free_port()
    server = _serve(tmp_path, _env(tmp_path, **env), port)
    try:
        assert _poll(f"http://127.0.0.1:{port}/readyz", server).status_code == 200
    finally:
        server.terminate()
        stdout, stderr = server.communicate(timeout=30)
    # serve runs a worker per core on PostgreSQL: each worker is a process and logs its line
    # (a worker still starting when the stop came may not have logged it yet)
    lines = _startup_lines(stdout)
    assert 1 <= len(lines) <= default_workers(is_sqlite=False, cores=usable_cores()), lines
    for line in lines:
        assert json.loads(line)["event"] == (
            f"reminders serve starting: database {database}, schema {head} (head); {queues}; "
            "providers email=outbox webhook=outbox"
        )
    assert "pw-7c1e5b" not in stdout + stderr
