"""Benchmark: reminders per second from the sweep to ``sent`` through the embedded queue.

Usage (from the repository root; PostgreSQL on 127.0.0.1)::

    .venv/bin/python bench/e2e.py [--reminders 3000] [--concurrency 1,4,16,64]
                                  [--mode inprocess,http,separate] [--repeat 1]

For each push concurrency C (and repetition), on 127.0.0.1:

1. a fresh PostgreSQL database (``--pg-admin-url``, default
   ``postgresql://postgres@127.0.0.1:5432/postgres``), migrated, seeded by COPY with N
   customers and N ``scheduled`` email reminders due now;
2. ``reminders serve`` (uvicorn, 1 worker, outbox provider in a temporary directory with
   fsync off, log level WARNING, the periodic sweep off) with
   ``REMINDERS_EMBEDDED_CONCURRENCY=C``. ``--mode inprocess`` (default, the one-machine
   deployment) runs the dispatcher inside ``serve``, handing each message to the receiver
   in the same process; ``http`` runs it inside ``serve`` but POSTing ``/push/{queue}`` to
   itself (``REMINDERS_EMBEDDED_DELIVER_IN_PROCESS=false``); ``separate`` runs
   ``reminders dispatch`` as a second process. Several modes (comma-separated) run side
   by side, alternating, so a noisy machine weighs on each alike;
3. the clock starts, one ``POST /cron/sweep`` publishes every reminder (delay 0), and the
   ledger is polled until N rows are ``sent``; the clock stops.

Printed per run: reminders/s (N / seconds from the sweep request to the last ``sent``), the
sweep's own duration, p50/p99 of each reminder's time from the sweep request to its
``sent_at`` (database clock), and the CPU time per reminder of ``serve`` (and ``dispatch``),
which a shared, loaded machine distorts less than the rate. The run
fails (exit 1) unless the ledger holds exactly one ``sent`` row per reminder and the queue
is empty.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db.migrations import upgrade_to_head  # noqa: E402
from app.db.tables import customers, reminders  # noqa: E402

REMINDERS = str(Path(sys.executable).parent / "reminders")
CRON_TOKEN = "bench-cron-token"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def seed_records(count: int, now: datetime) -> tuple[list[tuple], list[tuple]]:
    """Customer and reminder records in table column order (unset columns NULL)."""
    customer_rows, reminder_rows = [], []
    for i in range(count):
        customer = {
            "id": f"cust-{i:07d}",
            "email": f"cust-{i:07d}@example.com",
            "time_zone": "UTC",
            "opted_out_channels": "[]",
            "created_at": now,
            "updated_at": now,
        }
        reminder = {
            "id": f"bench:{i:07d}",
            "customer_id": customer["id"],
            "kind": "renewal",
            "due_at": now,
            "channels": '["email"]',
            "data": '{"plan": "Pro"}',
            "state": "scheduled",
            "schedule_version": 1,
            "created_at": now,
            "updated_at": now,
        }
        customer_rows.append(tuple(customer.get(c.name) for c in customers.columns))
        reminder_rows.append(tuple(reminder.get(c.name) for c in reminders.columns))
    return customer_rows, reminder_rows


async def create_database(admin_url: str) -> tuple[str, str]:
    """A fresh database; returns its name and its asyncpg (raw) URL."""
    name = f"rr_bench_e2e_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, f"{admin_url.rsplit('/', 1)[0]}/{name}"


async def drop_database(admin_url: str, name: str) -> None:
    """Remove a benchmark database."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def seed(raw_url: str, count: int) -> None:
    """N customers and N scheduled reminders due now, by COPY."""
    customer_rows, reminder_rows = seed_records(count, datetime.now(UTC))
    conn = await asyncpg.connect(raw_url)
    try:
        await conn.copy_records_to_table(
            "customers", records=customer_rows, columns=[c.name for c in customers.columns]
        )
        await conn.copy_records_to_table(
            "reminders", records=reminder_rows, columns=[c.name for c in reminders.columns]
        )
    finally:
        await conn.close()


def service_env(database_url: str, outbox: Path, concurrency: int, mode: str) -> dict:
    """The service's configuration for one run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    env.update(
        REMINDERS_DATABASE_URL=database_url,
        REMINDERS_PUSH_SECRETS="bench-push-secret",
        REMINDERS_API_TOKEN="bench-api-token",
        REMINDERS_CRON_TOKEN=CRON_TOKEN,
        REMINDERS_ADMIN_TOKEN="bench-admin-token",
        REMINDERS_OUTBOX_DIR=str(outbox),
        REMINDERS_OUTBOX_FSYNC="false",
        REMINDERS_LOG_LEVEL="WARNING",
        REMINDERS_QUEUE="embedded",
        REMINDERS_EMBEDDED_SWEEP_INTERVAL_SECONDS="0",
        REMINDERS_EMBEDDED_POLL_INTERVAL_SECONDS="0.05",
        REMINDERS_EMBEDDED_CONCURRENCY=str(concurrency),
        REMINDERS_EMBEDDED_BATCH_SIZE=str(max(64, 4 * concurrency)),
        REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false" if mode == "separate" else "true",
        REMINDERS_EMBEDDED_DELIVER_IN_PROCESS="true" if mode == "inprocess" else "false",
        REMINDERS_SWEEP_BATCH_SIZE="1000",
    )
    return env


async def wait_healthy(base_url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    """Until /healthz answers."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=1) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise SystemExit("the service exited during start-up")
            try:
                if (await client.get(f"{base_url}/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the service did not become healthy")


async def measure(raw_url: str, base_url: str, count: int) -> dict[str, Any]:
    """Sweep once, then poll the ledger until every reminder is sent."""
    conn = await asyncpg.connect(raw_url)
    try:
        swept_at = await conn.fetchval("SELECT now()")
        started = time.perf_counter()
        async with httpx.AsyncClient(timeout=120) as client:
            swept = await client.post(
                f"{base_url}/cron/sweep", headers={"Authorization": f"Bearer {CRON_TOKEN}"}
            )
        sweep_seconds = time.perf_counter() - started
        if swept.status_code != 200 or swept.json()["enqueued"] != count:
            raise SystemExit(f"sweep answered {swept.status_code}: {swept.text}")
        deadline = started + 600
        while await conn.fetchval("SELECT count(*) FROM send_records WHERE state = 'sent'") < count:
            if time.perf_counter() > deadline:
                raise SystemExit("not every reminder was sent within 10 minutes")
            await asyncio.sleep(0.02)
        elapsed = time.perf_counter() - started
        # From the sweep request (enqueued_at can stay NULL: a push may finish before the
        # sweep marks its batch enqueued, and a done reminder is not marked).
        latencies = await conn.fetch(
            "SELECT extract(epoch FROM sent_at - $1) AS seconds FROM send_records", swept_at
        )
        rows = await conn.fetchval("SELECT count(*) FROM send_records")
        for _ in range(300):  # the last round's acknowledgements land after its sends
            if not (left := await conn.fetchval("SELECT count(*) FROM queue_messages")):
                break
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    seconds = sorted(float(row["seconds"]) for row in latencies)
    if rows != count or left:
        raise SystemExit(f"verification failed: {rows} ledger rows, {left} messages left")
    return {
        "rate": count / elapsed,
        "elapsed": elapsed,
        "sweep": sweep_seconds,
        "p50": statistics.median(seconds),
        "p99": seconds[min(len(seconds) - 1, int(0.99 * len(seconds)))],
    }


def start_service(env: dict, port: int, log_path: Path, inprocess: bool) -> list[subprocess.Popen]:
    """``reminders serve`` and, unless in-process, ``reminders dispatch``; output to a log."""
    with log_path.open("wb") as log:
        started = [
            subprocess.Popen(
                [REMINDERS, "serve", "--port", str(port), "--no-migrate"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        ]
        if not inprocess:
            started.append(
                subprocess.Popen(
                    [REMINDERS, "dispatch"], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    return started


async def run_once(args: argparse.Namespace, concurrency: int, mode: str) -> dict[str, Any]:
    """One full run at one push concurrency, on its own database and processes."""
    name, raw_url = await create_database(args.pg_admin_url)
    database_url = raw_url.replace("postgresql://", "postgresql+asyncpg://", 1)
    processes: list[subprocess.Popen] = []
    try:
        await asyncio.to_thread(upgrade_to_head, database_url)
        await seed(raw_url, args.reminders)
        with tempfile.TemporaryDirectory(prefix="rr-bench-e2e-") as tmp:
            port = free_port()
            base_url = f"http://127.0.0.1:{port}"
            inprocess = mode != "separate"
            env = service_env(database_url, Path(tmp) / "outbox", concurrency, mode)
            env["REMINDERS_EMBEDDED_PUSH_BASE_URL"] = base_url
            processes.extend(start_service(env, port, Path(tmp) / "service.log", inprocess))
            await wait_healthy(base_url, processes[0])
            before = [cpu_seconds(p.pid) for p in processes]
            result = await measure(raw_url, base_url, args.reminders)
            used = [cpu_seconds(p.pid) - b for p, b in zip(processes, before, strict=True)]
            result["cpu_ms"] = [1000 * u / args.reminders for u in used]
            return result
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        await drop_database(args.pg_admin_url, name)


async def main() -> None:
    """Parse arguments, run every concurrency, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reminders", type=int, default=3000)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--mode", default="inprocess", help="inprocess, http, separate; a list")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    modes = args.mode.split(",")
    if not set(modes) <= {"inprocess", "http", "separate"}:
        parser.error("--mode: inprocess, http or separate (comma-separated)")
    print(f"{args.reminders} reminders, PostgreSQL, outbox (no fsync)")
    print(f"{'mode':>9} {'concurrency':>11} {'reminders/s':>12} {'total s':>8} {'sweep s':>8} "
          f"{'p50 s':>7} {'p99 s':>7}  CPU ms/reminder (serve[, dispatch])")  # fmt: skip
    for concurrency in [int(c) for c in args.concurrency.split(",")]:
        for _ in range(args.repeat):
            for mode in modes:
                await report_run(args, concurrency, mode)


async def report_run(args: argparse.Namespace, concurrency: int, mode: str) -> None:
    """One run, printed as a row of the table."""
    result = await run_once(args, concurrency, mode)
    print(
        f"{mode:>9} {concurrency:>11} {result['rate']:>12.0f} {result['elapsed']:>8.2f} "
        f"{result['sweep']:>8.2f} {result['p50']:>7.2f} {result['p99']:>7.2f}  "
        + ", ".join(f"{ms:.2f}" for ms in result["cpu_ms"]),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main())
