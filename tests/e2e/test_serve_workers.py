"""``reminders serve --workers 2`` starts both workers cleanly on a small machine: no
"Child process died" while they import the app (uvicorn's health check waits
REMINDERS_WORKER_HEALTHCHECK_SECONDS, not its own 5 s), and both answer. Without
``--workers`` it runs one per core on PostgreSQL, and its workers end with it."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from app.cli.serve_workers import default_workers, usable_cores
from app.supervisor import SUPERVISOR_PID
from tests.conftest import empty_all_tables
from tests.e2e.processes import (
    API,
    CRON,
    REMINDERS,
    Process,
    free_port,
    service_env,
    wait_healthy,
    wait_until,
)
from tests.support.cli import deployment_env, invoke, set_env
from tests.support.push import envelope, signed

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
    process = Process(args, env, tmp_path / "serve.log", group=True).start()
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


async def test_the_health_check_timeout_reaches_uvicorn(
    db_backend, clean_database_url, monkeypatch
):
    """REMINDERS_WORKER_HEALTHCHECK_SECONDS is what uvicorn's supervisor waits for a worker
    (only uvicorn.run is replaced: the check that the start above did not die is timing);
    without --workers, uvicorn is asked for the default count. Several workers reach it
    through the lean supervisor ``serve`` execs into (its command line, run here)."""
    import uvicorn

    from app import supervisor

    calls: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: calls.append(kwargs))
    execs: list[list[str]] = []
    monkeypatch.setattr(supervisor.os, "execv", lambda path, argv: execs.append(argv))
    for name in ("PROMETHEUS_MULTIPROC_DIR", SUPERVISOR_PID):  # serve sets them for workers
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    env = deployment_env(clean_database_url, REMINDERS_WORKER_HEALTHCHECK_SECONDS="45")
    set_env(monkeypatch, env)
    result = await invoke("serve", "--port", str(free_port()), "--no-migrate")
    assert result.exit_code == 0, result.output
    for argv in execs:
        assert argv[1:4] == ["-P", "-m", "app.supervisor"], argv
        supervisor.run_uvicorn(supervisor.ServeRun.from_argv(argv[4:]))
    [kwargs] = calls
    assert kwargs["timeout_worker_healthcheck"] == 45
    sqlite = db_backend == "sqlite"
    assert kwargs["workers"] == default_workers(is_sqlite=sqlite, cores=usable_cores())


async def test_by_default_serve_runs_a_worker_per_core_and_they_end_with_it(
    db_backend, clean_database_url, tmp_path
):
    """On PostgreSQL, ``serve`` without --workers runs one worker per core (at most 4).
    Killed with SIGKILL (only the supervisor: ``kill -9 PID``), it takes its workers with
    it: none is left holding the port, and a new ``serve`` starts on it at once."""
    if db_backend != "postgresql":
        pytest.skip("several workers need PostgreSQL (SQLite serves with one)")
    expected = default_workers(is_sqlite=False, cores=usable_cores())
    if expected < 2:
        pytest.skip("one core: the default is one worker")
    port = free_port()
    env = service_env(clean_database_url, tmp_path / "outbox", REMINDERS_LOG_LEVEL="INFO")
    args = [REMINDERS, "serve", "--port", str(port), "--no-migrate"]
    first = Process(args, env, tmp_path / "first.log", group=True).start()
    second = Process(args, env, tmp_path / "second.log", group=True)
    try:

        async def all_started() -> bool:
            return first.log.read_text(errors="replace").count("startup complete") >= expected

        await wait_until(all_started, timeout=120, what="every worker", processes=(first,))
        assert f"serving with {expected} worker processes" in first.log.read_text()
        assert first.popen is not None
        workers = _workers(first.popen.pid)
        assert len(workers) == expected, workers
        # The supervisor execs into a lean process: the service's libraries (pydantic's
        # compiled core, which every worker loads for its settings) are not in its memory.
        assert b"pydantic_core" not in _mapped_files(first.popen.pid)
        assert all(b"pydantic_core" in _mapped_files(worker) for worker in workers)
        first.popen.send_signal(signal.SIGKILL)  # the supervisor alone
        assert await first.wait_exit(timeout=10) == -signal.SIGKILL

        async def workers_gone() -> bool:
            return not _running(workers)

        await wait_until(workers_gone, timeout=30, what="the orphaned workers to exit")
        second.start()
        await wait_healthy(f"http://127.0.0.1:{port}", second, timeout=120)
    finally:
        first.stop()
        second.stop()


async def test_a_duplicate_is_answered_from_memory_by_whichever_worker_it_reaches(
    db_backend, clean_database_url, tmp_path
):
    """One worker sends; then the rows are removed behind the service's back, so only an
    answer from memory can still say ``duplicate`` (the database would quarantine an
    unknown reminder). Copies pushed on fresh connections reach both workers: each answers
    ``duplicate``, from the serve's shared memory of sent keys."""
    if db_backend != "postgresql":
        pytest.skip("several workers need PostgreSQL (SQLite serves with one)")
    port = free_port()
    metrics = tmp_path / "metrics"  # a file per worker: which of them answered
    metrics.mkdir()
    env = service_env(
        clean_database_url,
        tmp_path / "outbox",
        REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false",
        PROMETHEUS_MULTIPROC_DIR=str(metrics),
    )
    args = [REMINDERS, "serve", "--port", str(port), "--no-migrate", "--workers", "2"]
    process = Process(args, env, tmp_path / "serve.log", group=True).start()
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(base, process, timeout=120)
        async with httpx.AsyncClient(base_url=base, headers=API, timeout=30) as client:
            due = datetime.now(UTC).isoformat()
            await client.put("/v1/customers/c1", json={"email": "c1@example.com"})
            created = await client.put(
                "/v1/reminders/r1",
                json={"customer_id": "c1", "kind": "renewal", "due_at": due, "channels": ["email"]},
            )  # fmt: skip
            assert created.status_code == 201, created.text
            assert (await client.post("/cron/sweep", headers=CRON)).json()["enqueued"] == 1
        body, headers = signed(envelope("r1", message_id="copy-1"))

        async def push() -> httpx.Response:  # a fresh connection each: workers share them out
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                return await client.post("/push/reminders", content=body, headers=headers)

        first = await push()
        assert first.json()["outcome"] == "sent", first.text
        await empty_all_tables(clean_database_url)
        answers = []
        while len(answers) < 20 or len(_duplicates_by_worker(metrics)) < 2:
            assert len(answers) < 200, "every copy reached the same worker"
            answer = await push()
            answers.append((answer.status_code, answer.json()["outcome"]))
        assert answers == [(200, "duplicate")] * len(answers), answers
        assert len(list((tmp_path / "outbox" / "email").glob("*.eml"))) == 1
    finally:
        process.signal(signal.SIGTERM)
        await process.wait_exit(timeout=30)


def _duplicates_by_worker(metrics: Path) -> dict[str, float]:
    """The duplicates each worker answered, from its own counter file (those that did)."""
    from prometheus_client.multiprocess import MultiProcessCollector

    answered = {}  # a file lists a series once its worker has counted one
    for path in metrics.glob("counter_*.db"):
        for metric in MultiProcessCollector.merge([str(path)], accumulate=False):
            for sample in metric.samples:
                outcome = sample.labels.get("outcome")
                if sample.name == "reminders_deliveries_total" and outcome == "duplicate":
                    answered[path.name] = sample.value
    return answered


def _running(pids: list[int]) -> list[int]:
    """Those of ``pids`` that still run (not exited, nor a zombie waiting to be reaped)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            running.append(pid)
    return running


def _workers(pid: int) -> list[int]:
    """The worker processes of the supervisor ``pid`` (not multiprocessing's own helper)."""
    children = [
        int(child)
        for task in Path(f"/proc/{pid}/task").glob("*/children")
        for child in task.read_text().split()
    ]
    return [child for child in children if b"spawn_main" in _command_line(child)]


def _mapped_files(pid: int) -> bytes:
    return Path(f"/proc/{pid}/maps").read_bytes()


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
