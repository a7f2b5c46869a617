"""``reminders serve --workers 2`` starts both workers cleanly on a small machine: no
"Child process died" while they import the app (uvicorn's health check waits
REMINDERS_WORKER_HEALTHCHECK_SECONDS, not its own 5 s), and both answer."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.e2e.processes import REMINDERS, Process, free_port, service_env, wait_until
from tests.support.cli import deployment_env, invoke, set_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_two_workers_start_without_a_health_check_death(
    db_backend, clean_database_url, tmp_path
):
    """Both workers log "Application startup complete"; none is killed and replaced."""
    if db_backend != "postgresql":
        pytest.skip("several workers need PostgreSQL (SQLite serves with one)")
    port = free_port()
    env = service_env(clean_database_url, tmp_path / "outbox", REMINDERS_LOG_LEVEL="INFO")
    args = [REMINDERS, "serve", "--port", str(port), "--no-migrate", "--workers", "2"]
    process = Process(args, env, tmp_path / "serve.log").start()
    started = time.monotonic()
    try:

        async def both_started() -> bool:
            return process.log.read_text(errors="replace").count("startup complete") >= 2

        await wait_until(both_started, timeout=120, what="two workers", processes=(process,))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/readyz")).status_code == 200
        log = process.log.read_text(errors="replace")
        assert "died" not in log, process.output()
        assert "Traceback" not in log, process.output()
        print(f"both workers ready after {time.monotonic() - started:.1f} s")
    finally:
        process.signal(signal.SIGTERM)
        await process.wait_exit(timeout=30)


async def test_the_health_check_timeout_reaches_uvicorn(clean_database_url, monkeypatch):
    """REMINDERS_WORKER_HEALTHCHECK_SECONDS is what uvicorn's supervisor waits for a worker
    (only uvicorn.run is replaced: the check that the start above did not die is timing)."""
    import uvicorn

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append(kwargs))
    env = deployment_env(clean_database_url, REMINDERS_WORKER_HEALTHCHECK_SECONDS="45")
    set_env(monkeypatch, env)
    result = await invoke("serve", "--port", str(free_port()), "--no-migrate")
    assert result.exit_code == 0, result.output
    [kwargs] = calls
    assert kwargs["timeout_worker_healthcheck"] == 45
