"""Benchmark of bulk registration: reminders per second through ``POST /v1/reminders:batch``.

Usage (from the repository root; PostgreSQL on 127.0.0.1:5432, user ``postgres``, trust)::

    .venv/bin/python bench/register.py [--reminders 200000] [--batch 1000] [--concurrency 4]
                                       [--db postgresql,sqlite]

For each database: a fresh one (PostgreSQL: a new database on ``--pg-admin-url``; SQLite: a
file in a temporary directory), migrated to head; ``reminders serve`` (uvicorn, 1 worker,
uvloop + httptools, access log off, as deployed) on a loopback port with the memory queue
(nothing is published: registration alone is measured). The client (aiohttp, bodies encoded
before the clock starts so the client's JSON work is not timed) then sends, at concurrency C:

1. **customers**: ``--reminders / 10`` customers through ``/v1/customers:batch``;
2. **new**: N reminders (10 per customer, due over the next 30 days, one or two channels)
   through ``/v1/reminders:batch`` in batches of ``--batch`` → every item ``created``;
3. **replay**: the same batches again → every item ``unchanged`` (the idempotent retry a
   client makes after a timeout).

Printed per phase: items/s (wall clock, first request to last answer), batch latency p50/p99,
CPU per item (µs) of the server process, of its PostgreSQL backends and of this client (all
three share the machine's cores: on 2 cores their sum bounds the rate). Afterwards the
database must hold exactly N reminders and every item must have had the expected status;
otherwise the problems are printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.push import (
    PG_ADMIN_URL,
    PYTHON,
    ROOT,
    Target,
    backend_pids,
    cpu_seconds,
    create_database,
    drop_database,
    free_port,
    migrate,
    pg_url,
    python_env,
    serving,
)

CUSTOMERS_PER_REMINDER = 10


def process_tree(pid: int) -> list[int]:
    """A process and its descendants (uvicorn's worker processes with ``--workers``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


class TreeMeter:
    """CPU seconds of the server (all its processes) and of the database's backends."""

    def __init__(self, server_pid: int, database: str | None) -> None:
        self.server_pid, self.database = server_pid, database
        self._start: tuple[dict[int, float], dict[int, float]] = ({}, {})

    def _snapshot(self) -> tuple[dict[int, float], dict[int, float]]:
        server = {pid: cpu_seconds(pid) for pid in process_tree(self.server_pid)}
        backends = backend_pids(self.database) if self.database else []
        return server, {pid: cpu_seconds(pid) for pid in backends}

    def mark(self) -> None:
        """Start counting from now."""
        self._start = self._snapshot()

    def read(self) -> tuple[float, float]:
        """(server, database) CPU seconds since the mark."""
        now = self._snapshot()
        return tuple(  # type: ignore[return-value]
            sum(value - before.get(pid, 0.0) for pid, value in after.items())
            for before, after in zip(self._start, now, strict=True)
        )


@dataclass
class PhaseResult:
    """One phase against one database."""

    database: str
    phase: str
    items: int
    seconds: float
    latencies: list[float]
    server_cpu: float
    db_cpu: float
    client_cpu: float
    wrong: int

    def row(self) -> str:
        """A table row."""
        lat = sorted(self.latencies)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0
        per = 1e6 / max(self.items, 1)
        return (
            f"{self.database:<11} {self.phase:<10} {self.items:>8}"
            f" {self.items / self.seconds:>10,.0f}"
            f" {statistics.median(lat) * 1e3:>8.1f} {p99 * 1e3:>8.1f}"
            f" {self.server_cpu * per:>9.1f} {self.db_cpu * per:>9.1f}"
            f" {self.client_cpu * per:>9.1f} {self.wrong:>6}"
        )


def customer_batches(count: int, size: int) -> list[bytes]:
    """Encoded customers batches: ids c000000…, an address each."""
    items = [{"id": f"c{n:06}", "email": f"c{n:06}@example.com"} for n in range(count)]
    return [json.dumps({"items": items[i : i + size]}).encode() for i in range(0, count, size)]


def reminder_batches(count: int, size: int, now: datetime) -> list[bytes]:
    """Encoded reminders batches: 10 per customer, due over 30 days, every third on two channels."""
    items = [
        {
            "id": f"digest:c{n // CUSTOMERS_PER_REMINDER:06}:{n % CUSTOMERS_PER_REMINDER}",
            "customer_id": f"c{n // CUSTOMERS_PER_REMINDER:06}",
            "kind": "weekly_digest",
            "due_at": (now + timedelta(minutes=n % 43200)).isoformat(),
            "channels": ["email", "webhook"] if n % 3 == 0 else ["email"],
            "data": {"week": n % 52},
        }
        for n in range(count)
    ]
    return [json.dumps({"items": items[i : i + size]}).encode() for i in range(0, count, size)]


async def send_all(
    url: str, token: str, bodies: list[bytes], concurrency: int, expected: str
) -> tuple[float, list[float], int]:
    """POST every body with C in flight; (seconds, per-batch latencies, wrong item count)."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    latencies: list[float] = []
    wrong = 0
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal wrong
        while not queue.empty():
            body = queue.get_nowait()
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                answer = await response.json() if response.status == 200 else None
            latencies.append(time.perf_counter() - started)
            if answer is None:
                wrong += body.count(b'"id"')
                continue
            wrong += sum(1 for result in answer["results"] if result["status"] != expected)

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return time.perf_counter() - started, latencies, wrong


async def count_reminders(url: str) -> int:
    """Rows in reminders (asyncpg for PostgreSQL, sqlite3 for SQLite)."""
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.split("///", 1)[1]) as conn:
            return int(conn.execute("SELECT count(*) FROM reminders").fetchone()[0])
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM reminders"))
    finally:
        await conn.close()


def run_phases(
    name: str, database_url: str, pg_database: str | None, args: argparse.Namespace, work: Path
) -> tuple[list[PhaseResult], list[str]]:
    """Serve the service on one database and run the three phases against it."""
    token = secrets.token_hex(16)
    env = python_env(
        Target("service", ROOT),
        {
            "REMINDERS_DATABASE_URL": database_url,
            "REMINDERS_API_TOKEN": token,
            "REMINDERS_CRON_TOKEN": secrets.token_hex(16),
            "REMINDERS_ADMIN_TOKEN": secrets.token_hex(16),
            "REMINDERS_METRICS_TOKEN": secrets.token_hex(16),
            "REMINDERS_PUSH_SECRETS": secrets.token_hex(16),
            "REMINDERS_OUTBOX_DIR": str(work / f"outbox-{name}"),
            "REMINDERS_QUEUE": "memory",
        },
    )
    port = free_port()
    command = [PYTHON, "-c", "from app.cli import main; main()", "serve", "--port", str(port)]
    command += ["--no-migrate", "--workers", str(args.workers if name != "sqlite" else 1)]
    customers = customer_batches(args.reminders // CUSTOMERS_PER_REMINDER, args.batch)
    reminders = reminder_batches(args.reminders, args.batch, datetime.now(UTC))
    results = []
    with serving(
        command, cwd=ROOT, env=env, log=work / f"{name}.log", ready_path="/healthz", port=port
    ) as server:
        base = f"http://127.0.0.1:{port}/v1"
        meter = TreeMeter(server.pid, pg_database)
        phases = [
            ("customers", f"{base}/customers:batch", customers, "created"),
            ("new", f"{base}/reminders:batch", reminders, "created"),
            ("replay", f"{base}/reminders:batch", reminders, "unchanged"),
        ]
        for phase, url, bodies, expected in phases:
            meter.mark()
            client_started = time.process_time()
            seconds, latencies, wrong = asyncio.run(
                send_all(url, token, bodies, args.concurrency, expected)
            )
            client_cpu = time.process_time() - client_started
            server_cpu, db_cpu = meter.read()
            items = sum(body.count(b'"id"') for body in bodies)
            results.append(
                PhaseResult(
                    name, phase, items, seconds, latencies, server_cpu, db_cpu, client_cpu, wrong
                )
            )
    problems = [f"{name} {r.phase}: {r.wrong} items not {r.phase}" for r in results if r.wrong]
    stored = asyncio.run(count_reminders(database_url))
    if stored != args.reminders:
        problems.append(f"{name}: {stored} reminders stored, expected {args.reminders}")
    return results, problems


def bench_database(name: str, args: argparse.Namespace, work: Path) -> tuple[list, list]:
    """A fresh database of one kind, migrated, measured, removed."""
    target = Target("service", ROOT)
    if name == "sqlite":
        url = f"sqlite+aiosqlite:///{work / 'register.db'}"
        migrate(target, url)
        return run_phases(name, url, None, args, work)
    database = f"rr_register_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(create_database(args.pg_admin_url, database))
    try:
        url = pg_url(args.pg_admin_url, database, driver="postgresql+asyncpg")
        migrate(target, url)
        return run_phases(name, url, database, args, work)
    finally:
        asyncio.run(drop_database(args.pg_admin_url, database))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reminders", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="items per request (≤ 1000)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    parser.add_argument("--db", default="postgresql,sqlite", help="databases, comma-separated")
    parser.add_argument(
        "--workers", type=int, default=1, help="reminders serve --workers (PostgreSQL only)"
    )
    parser.add_argument("--pg-admin-url", default=PG_ADMIN_URL)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run every database, print the table, exit 1 on any problem."""
    args = parse_args(argv)
    rows, problems = [], []
    with tempfile.TemporaryDirectory(prefix="rr-register-") as tmp:
        for name in args.db.split(","):
            results, found = bench_database(name, args, Path(tmp))
            rows += results
            problems += found
    print(
        f"{'database':<11} {'phase':<10} {'items':>8} {'items/s':>10} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'server µs':>9} {'db µs':>9} {'client µs':>9} {'wrong':>6}"
    )
    for result in rows:
        print(result.row())
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
