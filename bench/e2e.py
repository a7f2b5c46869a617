"""Benchmark: reminders per second from the sweep to ``sent`` through the embedded queue.

Usage (from the repository root; PostgreSQL on 127.0.0.1)::

    .venv/bin/python bench/e2e.py [--reminders 3000] [--concurrency 16,64]
                                  [--mode inprocess,http,separate] [--repeat 1]
                                  [--db postgresql,sqlite] [--sweep-only]
                                  [--set REMINDERS_NAME=value ...] [--baseline PATH]
                                  [--workers N]

``reminders serve`` runs as a user runs it: every setting at its default except the ones a
deployment must give (database URL, tokens, the outbox directory) and the ones a flag
changes (``--concurrency`` sets ``REMINDERS_EMBEDDED_CONCURRENCY``, ``--mode`` the dispatcher's
placement, ``--workers N`` runs ``serve --workers N``, ``--set`` anything else); the run
prints the settings it changed. Nothing else
touches the service's database while it runs: no ANALYZE, no tuning (the sweep refreshes
the statistics it invalidates itself, see ``app/services/sweep.py``).

For each database, push concurrency C (and repetition), on 127.0.0.1:

1. a fresh database (PostgreSQL: a new database on ``--pg-admin-url``, default
   ``postgresql://postgres@127.0.0.1:5432/postgres``, seeded by COPY; SQLite: a file in a
   temporary directory, seeded by executemany in chunks), migrated, holding N customers
   and N ``scheduled`` email reminders due now;
2. ``reminders serve`` (uvicorn, its default of one worker unless ``--workers``, the outbox
   provider writing to a temporary directory). ``--mode inprocess`` (the default, as
   ``serve`` runs by default) runs the dispatcher inside ``serve``, handing each message
   to the receiver in the same process;
   ``http`` runs it inside ``serve`` but POSTing ``/push/{queue}`` to itself
   (``REMINDERS_EMBEDDED_DELIVER_IN_PROCESS=false``); ``separate`` runs ``reminders
   dispatch`` as a second process (``REMINDERS_EMBEDDED_DISPATCH_IN_SERVE=false``). Several
   modes (comma-separated) run side by side, alternating, so a noisy machine weighs on each
   alike;
3. the clock starts, ``POST /cron/sweep`` is repeated until it answers ``remaining: 0`` (a
   sweep stops at its time budget, ``REMINDERS_SWEEP_TIME_BUDGET_SECONDS``; ``serve``'s own
   periodic sweep runs too, as by default), and the ledger is polled until N rows are
   ``sent``; the clock stops.

``--sweep-only`` runs no dispatcher (``REMINDERS_EMBEDDED_DISPATCH_IN_SERVE=false``): the
figure is the sweeps alone, from the first request to the last answer, and the run checks
that N messages wait in the queue and N reminders are ``enqueued`` (``bench/sweep.py``
times ``reminders sweep`` itself). ``--baseline PATH`` runs every measurement a second
time, alternating, with the code of another checkout (``PATH``, e.g. a ``git worktree`` of
an older commit, run by this interpreter with ``PYTHONPATH=PATH``), for before/after
comparisons on the same schema.

Printed per run: reminders/s (N / seconds from the first sweep request to the last ``sent``,
or to the last sweep answer with ``--sweep-only``), the sweeps' own duration (sum of their
requests) and count, p50/p99 of each reminder's time from the first sweep request to its
``sent_at`` (database clock), in runs of 200,000 or more the rate of each successive 100,000
sent (flat, or not, from the first to the last), CPU time per reminder in µs, which a
shared, loaded machine distorts less than the rate: ``serve``'s user time, its system
(kernel) time (with ``--workers``, of the supervisor and every worker together), the
PostgreSQL backends serving the benchmark's database (user + system, from
``/proc``, sampled every 0.1 s; the server's shared background processes are not counted)
and, in ``separate`` mode, ``dispatch``'s user + system; and ``serve``'s resident memory
(VmRSS, sampled every 0.5 s; with ``--workers``, the sum over its processes): before the
first sweep, the highest and the last sample. The
run fails (exit 1) unless the ledger holds exactly one ``sent`` row per reminder and the
queue is empty.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy import JSON, Table
from sqlalchemy import create_engine as create_sync_engine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.db.migrations import upgrade_to_head  # noqa: E402
from app.db.tables import customers, reminders  # noqa: E402
from bench.process_tree import (  # noqa: E402
    cpu_since,
    cpu_split,
    tree_cpu,
    tree_memory_mb,
    worker_count,
)

CRON_TOKEN = "bench-cron-token-8a2e6c0f4b9d7153d3e5a7"
SQLITE_CHUNK = 20_000  # rows per executemany while seeding a SQLite file


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    return sum(cpu_split(pid))


def postgres_backends(db_name: str) -> dict[int, float]:
    """CPU seconds (user + system) of each PostgreSQL backend connected to ``db_name``,
    found by its process title (``postgres: user db host(port) state``)."""
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if title.startswith("postgres: ") and f" {db_name} " in title:
                found[int(entry.name)] = cpu_seconds(int(entry.name))
        except OSError:
            continue  # gone meanwhile
    return found


@dataclass
class BackendSampler:
    """The CPU seconds of a database's PostgreSQL backends while a run lasts (each backend's
    latest sample: up to 0.1 s of a backend that exits between samples is missed)."""

    db_name: str | None
    # The bench's own backends (its progress polls): not the service's work.
    own_pids: frozenset[int] = frozenset()
    seen: dict[int, float] = field(default_factory=dict)
    start: dict[int, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Sample until cancelled (nothing to sample for SQLite)."""
        if self.db_name is None:
            return
        self.seen.update(postgres_backends(self.db_name))
        self.start = dict(self.seen)
        while True:
            await asyncio.sleep(0.1)
            self.seen.update(postgres_backends(self.db_name))

    def used(self) -> float | None:
        """CPU seconds the backends used since sampling began (None: not PostgreSQL)."""
        if self.db_name is None:
            return None
        return sum(
            cpu - self.start.get(pid, 0.0)
            for pid, cpu in self.seen.items()
            if pid not in self.own_pids
        )


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def seed_dicts(start: int, stop: int, now: datetime) -> tuple[list[dict], list[dict]]:
    """Customers and reminders ``start..stop`` as column mappings (unset columns NULL), JSON
    columns as Python values."""
    customer_rows, reminder_rows = [], []
    for i in range(start, stop):
        customer_rows.append(
            {
                "id": f"cust-{i:07d}",
                "email": f"cust-{i:07d}@example.com",
                "time_zone": "UTC",
                "opted_out_channels": [],
                "created_at": now,
                "updated_at": now,
            }
        )
        reminder_rows.append(
            {
                "id": f"bench:{i:07d}",
                "customer_id": f"cust-{i:07d}",
                "kind": "renewal",
                "due_at": now,
                "channels": ["email"],
                "data": {"plan": "Pro"},
                "state": "scheduled",
                "schedule_version": 1,
                "created_at": now,
                "updated_at": now,
            }
        )
    return customer_rows, reminder_rows


def copy_record(table: Table, row: dict) -> tuple:
    """A row in the table's column order for COPY, JSON columns as text."""
    return tuple(
        json.dumps(row[c.name]) if isinstance(c.type, JSON) and c.name in row else row.get(c.name)
        for c in table.columns
    )


class Database:
    """One benchmark database: created, migrated, seeded, queried, removed."""

    name = ""
    url = ""  # the service's SQLAlchemy URL

    async def seed(self, count: int) -> None:
        """N customers and N scheduled reminders due now."""
        raise NotImplementedError

    async def scalar(self, sql: str) -> Any:
        """The first column of the first row of a query."""
        raise NotImplementedError

    async def column(self, sql: str) -> list[Any]:
        """The first column of every row of a query."""
        raise NotImplementedError

    async def now(self) -> datetime:
        """The database's clock (the ledger's ``sent_at`` is written by the service's)."""
        return datetime.now(UTC)

    async def own_backends(self) -> frozenset[int]:
        """The database server processes serving this bench itself (none but PostgreSQL's)."""
        return frozenset()

    async def drop(self) -> None:
        """Remove the database."""


class PostgresDatabase(Database):
    """A fresh PostgreSQL database on the admin URL's server."""

    def __init__(self, admin_url: str, prefix: str = "rr_bench_e2e_") -> None:
        self.name = "postgresql"
        self.admin_url = admin_url
        self.db_name = f"{prefix}{uuid.uuid4().hex[:8]}"
        self.raw_url = f"{admin_url.rsplit('/', 1)[0]}/{self.db_name}"
        self.url = self.raw_url.replace("postgresql://", "postgresql+asyncpg://", 1)
        self.conn: asyncpg.Connection | None = None

    async def create(self, code: Path = ROOT) -> None:
        """Create, and migrate with the checkout ``code`` (the one that will serve it)."""
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f'CREATE DATABASE "{self.db_name}"')
        finally:
            await admin.close()
        await migrate(self.url, code)
        self.conn = await asyncpg.connect(self.raw_url)

    async def seed(self, count: int) -> None:
        """By COPY."""
        customer_rows, reminder_rows = seed_dicts(0, count, datetime.now(UTC))
        assert self.conn is not None
        await self.conn.copy_records_to_table(
            "customers",
            records=[copy_record(customers, row) for row in customer_rows],
            columns=[c.name for c in customers.columns],
        )
        await self.conn.copy_records_to_table(
            "reminders",
            records=[copy_record(reminders, row) for row in reminder_rows],
            columns=[c.name for c in reminders.columns],
        )

    async def scalar(self, sql: str) -> Any:
        assert self.conn is not None
        return await self.conn.fetchval(sql)

    async def column(self, sql: str) -> list[Any]:
        assert self.conn is not None
        return [row[0] for row in await self.conn.fetch(sql)]

    async def now(self) -> datetime:
        return await self.scalar("SELECT now()")

    async def own_backends(self) -> frozenset[int]:
        return frozenset({await self.scalar("SELECT pg_backend_pid()")})

    async def drop(self) -> None:
        if self.conn is not None:
            await self.conn.close()
        admin = await asyncpg.connect(self.admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
        finally:
            await admin.close()


class SqliteDatabase(Database):
    """A SQLite file in a temporary directory; read by sqlite3 beside the service (WAL)."""

    def __init__(self, directory: Path) -> None:
        self.name = "sqlite"
        self.path = directory / "e2e.db"
        self.url = f"sqlite+aiosqlite:///{self.path}"

    async def create(self, code: Path = ROOT) -> None:
        """Create, and migrate with the checkout ``code`` (the one that will serve it)."""
        await migrate(self.url, code)

    async def seed(self, count: int) -> None:
        """By executemany in chunks, through SQLAlchemy so instants are stored as the
        service stores them."""
        await asyncio.to_thread(self._seed, count)

    def _seed(self, count: int) -> None:
        engine = create_sync_engine(f"sqlite:///{self.path}")
        now = datetime.now(UTC)
        try:
            with engine.begin() as conn:
                for start in range(0, count, SQLITE_CHUNK):
                    customer_rows, reminder_rows = seed_dicts(
                        start, min(count, start + SQLITE_CHUNK), now
                    )
                    conn.execute(customers.insert(), customer_rows)
                    conn.execute(reminders.insert(), reminder_rows)
        finally:
            engine.dispose()

    async def scalar(self, sql: str) -> Any:
        return (await self.column(sql))[0]

    async def column(self, sql: str) -> list[Any]:
        return await asyncio.to_thread(self._column, sql)

    def _column(self, sql: str) -> list[Any]:
        with sqlite3.connect(self.path, timeout=60) as conn:
            return [row[0] for row in conn.execute(sql)]


async def migrate(url: str, code: Path) -> None:
    """Migrate to the head of the checkout ``code``: a baseline checkout's service refuses
    a schema newer than its own, so it gets its own migrations (``reminders migrate``)."""
    if code == ROOT:
        await asyncio.to_thread(upgrade_to_head, url)
        return
    command = [sys.executable, "-c", "from app.cli import main; main()", "migrate"]
    env = {**os.environ, "PYTHONPATH": str(code), "REMINDERS_DATABASE_URL": url}
    done = await asyncio.to_thread(
        subprocess.run, command, env=env, cwd=code, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"migrating with {code} failed: {done.stdout}{done.stderr}")


@asynccontextmanager
async def database(
    kind: str, args: argparse.Namespace, tmp: Path, code: Path = ROOT
) -> AsyncIterator[Database]:
    """A created, empty database of ``kind`` migrated by ``code``, removed afterwards."""
    db: PostgresDatabase | SqliteDatabase = (
        PostgresDatabase(args.pg_admin_url, args.db_prefix)
        if kind == "postgresql"
        else SqliteDatabase(tmp)
    )
    try:
        await db.create(code)
        yield db
    finally:
        await db.drop()


# What a deployment must give (secrets and tokens have no default), as the bench gives it.
REQUIRED = {
    "REMINDERS_PUSH_SECRETS": "bench-push-secret-5e9c3a7f1d8b2046a4c6e8",
    "REMINDERS_API_TOKEN": "bench-api-token-4c8e2a6f0d9b7135e1a3c5",
    "REMINDERS_CRON_TOKEN": CRON_TOKEN,
    "REMINDERS_ADMIN_TOKEN": "bench-admin-token-1f5b9d3a7e2c6084f2b4d6",
    "REMINDERS_METRICS_TOKEN": "bench-metrics-token-7d1b5f9a3c2e8046b4d6f8",
}
REQUIRED_NAMES = (*REQUIRED, "REMINDERS_DATABASE_URL", "REMINDERS_OUTBOX_DIR")


def flag_settings(
    mode: str, concurrency: int | None, overrides: dict[str, str], base_url: str
) -> dict[str, str]:
    """The settings a run changes from their defaults because a flag says so."""
    changed = dict(overrides)
    if concurrency is not None:
        changed["REMINDERS_EMBEDDED_CONCURRENCY"] = str(concurrency)
    if mode in ("separate", "sweep-only"):
        changed["REMINDERS_EMBEDDED_DISPATCH_IN_SERVE"] = "false"
    if mode == "http":
        changed["REMINDERS_EMBEDDED_DELIVER_IN_PROCESS"] = "false"
    if mode in ("http", "separate"):
        changed["REMINDERS_EMBEDDED_PUSH_BASE_URL"] = base_url  # where to push over HTTP
    return changed


def service_env(database_url: str, outbox: Path, changed: dict[str, str]) -> dict:
    """The service's environment: no REMINDERS_ variable of the caller's, the required
    settings, and the ones the flags changed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    return {
        **env,
        **REQUIRED,
        "REMINDERS_DATABASE_URL": database_url,
        "REMINDERS_OUTBOX_DIR": str(outbox),
        **changed,
    }


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


@dataclass
class MemorySampler:
    """The memory of ``serve``'s process tree every half second while a run lasts: the
    tree's RSS (pages the processes share counted in each) and PSS (counted once in all),
    and each process's highest RSS."""

    pid: int
    samples: list[float] = field(default_factory=list)
    pss: list[float] = field(default_factory=list)
    peaks: dict[int, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            memory = tree_memory_mb(self.pid)
            self.samples.append(sum(rss for rss, _ in memory.values()))
            self.pss.append(sum(pss for _, pss in memory.values()))
            for member, (rss, _) in memory.items():
                self.peaks[member] = max(rss, self.peaks.get(member, 0.0))
            await asyncio.sleep(0.5)

    def summary(self) -> tuple[float, float, float]:
        """First, highest and last sample of the tree's RSS (MB)."""
        return self.samples[0], max(self.samples), self.samples[-1]

    def detail(self) -> str:
        """The tree's highest PSS and each process's highest RSS, the server first."""
        peaks = " + ".join(f"{self.peaks[member]:.0f}" for member in sorted(self.peaks))
        return f"PSS max {max(self.pss):.0f} MB; RSS max per process {peaks} MB"


async def sweep_until_done(db: Database, base_url: str) -> tuple[float, int]:
    """``POST /cron/sweep`` until nothing is left; the requests' total seconds and count.
    (``serve``'s periodic sweep may take part of the work: the run checks the rows.)"""
    seconds, sweeps = 0.0, 0
    async with httpx.AsyncClient(timeout=900) as client:
        while True:
            started = time.perf_counter()
            swept = await client.post(
                f"{base_url}/cron/sweep", headers={"Authorization": f"Bearer {CRON_TOKEN}"}
            )
            seconds += time.perf_counter() - started
            sweeps += 1
            if swept.status_code != 200:
                raise SystemExit(f"sweep answered {swept.status_code}: {swept.text}")
            if swept.json()["remaining"] == 0:
                break
    left = await db.scalar("SELECT count(*) FROM reminders WHERE state = 'scheduled'")
    if left:
        raise SystemExit(f"the sweeps left {left} reminders scheduled")
    return seconds, sweeps


async def measure(db: Database, base_url: str, count: int, sweep_only: bool) -> dict[str, Any]:
    """Sweep until done, then (unless sweep-only) poll the ledger until every reminder is
    sent. Counting the sent rows costs the database more the more there are (a tenth of a
    second at a million, on the cores the service needs), so a large run polls seldom; the
    run's end is the last ``sent_at``, not the poll that saw it."""
    swept_at = await db.now()
    started = time.perf_counter()
    sweep_seconds, sweeps = await sweep_until_done(db, base_url)
    result: dict[str, Any] = {"sweep": sweep_seconds, "sweeps": sweeps}
    if sweep_only:
        result.update(rate=count / sweep_seconds, elapsed=time.perf_counter() - started)
        await verify_swept(db, count)
        return result
    deadline = started + max(600, count / 50)  # 50/s: a loaded, shared machine
    poll = 0.02 if count <= 20_000 else 1.0 if count <= 200_000 else 5.0
    while await db.scalar("SELECT count(*) FROM send_records WHERE state = 'sent'") < count:
        if time.perf_counter() > deadline:
            raise SystemExit("not every reminder was sent in time")
        await asyncio.sleep(poll)
    seconds = sorted(
        (sent_at(value) - swept_at).total_seconds()
        for value in await db.column("SELECT sent_at FROM send_records")
    )
    elapsed = seconds[-1]  # from the first sweep request to the last send, database clock
    rows = len(seconds)
    for _ in range(300):  # the last round's acknowledgements land after its sends
        if not (left := await db.scalar("SELECT count(*) FROM queue_messages")):
            break
        await asyncio.sleep(0.1)
    if rows != count or left:
        raise SystemExit(f"verification failed: {rows} ledger rows, {left} messages left")
    result.update(
        rate=count / elapsed,
        elapsed=elapsed,
        p50=statistics.median(seconds),
        p99=seconds[min(len(seconds) - 1, int(0.99 * len(seconds)))],
        slices=slice_rates(seconds, SLICE),
    )
    return result


SLICE = 100_000  # a long run's rate is printed per this many sent reminders


def slice_rates(seconds: list[float], size: int) -> list[float]:
    """Reminders/s of each successive ``size`` sent (by ``sent_at``, the first slice from
    the first sweep request): flat from first to last, or not. Empty below two slices."""
    if len(seconds) < 2 * size:
        return []
    ends = [0.0, *seconds[size - 1 :: size]]
    return [size / max(later - earlier, 1e-9) for earlier, later in itertools.pairwise(ends)]


def sent_at(value: datetime | str) -> datetime:
    """A ledger instant as read back: PostgreSQL's timestamptz, SQLite's naive UTC text."""
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


async def verify_swept(db: Database, count: int) -> None:
    """After a sweep-only run: one message per reminder, every reminder enqueued."""
    messages = await db.scalar("SELECT count(*) FROM queue_messages")
    enqueued = await db.scalar("SELECT count(*) FROM reminders WHERE state = 'enqueued'")
    if messages != count or enqueued != count:
        raise SystemExit(f"verification failed: {messages} messages, {enqueued} enqueued")


def start_service(
    env: dict, port: int, log_path: Path, mode: str, code: Path, workers: int | None = None
) -> list[subprocess.Popen]:
    """``reminders serve`` of the checkout ``code`` and, in ``separate`` mode,
    ``reminders dispatch``; output to a log."""
    command = [sys.executable, "-c", "from app.cli import main; main()"]
    env = {**env, "PYTHONPATH": str(code)}
    with log_path.open("wb") as log:
        started = [
            subprocess.Popen(
                [*command, "serve", "--port", str(port), "--no-migrate", *workers_flag(workers)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=code,
            )
        ]
        if mode == "separate":
            started.append(
                subprocess.Popen(
                    [*command, "dispatch"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=code
                )
            )
    return started


def workers_flag(workers: int | None) -> list[str]:
    """``serve``'s arguments for ``--workers`` (none: its default)."""
    return [] if workers is None else ["--workers", str(workers)]


async def wait_for_workers(pid: int, workers: int | None, timeout: float = 120) -> None:
    """Until every worker of ``serve`` runs. No longer: each worker's startup sweep would
    start delivering before the clock does. A worker still starting up when the run begins
    has its startup's CPU counted in the run's (a few µs per reminder at 100,000)."""
    deadline = time.monotonic() + timeout
    while workers and workers > 1 and worker_count(pid) < workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"serve did not start {workers} workers")
        await asyncio.sleep(0.1)


@dataclass(frozen=True)
class Run:
    """One row of the table: which database, dispatcher mode, concurrency and code."""

    db: str
    mode: str  # inprocess, http, separate or sweep-only
    concurrency: int | None  # None: the default
    code: Path
    label: str  # "this" or "baseline"


async def run_once(args: argparse.Namespace, run: Run) -> dict[str, Any]:
    """One full run on its own database and processes."""
    with tempfile.TemporaryDirectory(prefix="rr-bench-e2e-") as tmp:
        return await run_in(args, run, Path(tmp))


async def run_in(args: argparse.Namespace, run: Run, tmp: Path) -> dict[str, Any]:
    """One full run in the directory ``tmp`` (its outbox stays there: ``tmp/outbox``)."""
    async with database(run.db, args, tmp, run.code) as db:
        await db.seed(args.reminders)
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        changed = flag_settings(run.mode, run.concurrency, args.overrides, base_url)
        env = service_env(db.url, tmp / "outbox", changed)
        processes = start_service(env, port, tmp / "service.log", run.mode, run.code, args.workers)
        sampler = MemorySampler(processes[0].pid)
        backends = BackendSampler(getattr(db, "db_name", None), await db.own_backends())
        tasks: list[asyncio.Task[None]] = []
        try:
            await wait_healthy(base_url, processes[0])
            await wait_for_workers(processes[0].pid, args.workers)
            serve_before = tree_cpu(processes[0].pid)
            before = [cpu_seconds(p.pid) for p in processes[1:]]
            tasks = [asyncio.create_task(sampler.run()), asyncio.create_task(backends.run())]
            await asyncio.sleep(0)  # the first samples: before the first sweep
            result = await measure(db, base_url, args.reminders, run.mode == "sweep-only")
            serve_after = tree_cpu(processes[0].pid)
            used = [cpu_seconds(p.pid) - b for p, b in zip(processes[1:], before, strict=True)]
            await asyncio.sleep(0.2)  # the backends' last moments
        finally:
            for task in tasks:
                task.cancel()
            for process in processes:
                process.terminate()
                process.wait(30)
        per = 1e6 / args.reminders
        database_cpu = backends.used()
        serve_user, serve_system = cpu_since(serve_before, serve_after)
        result["cpu_us"] = [
            serve_user * per,
            serve_system * per,
            None if database_cpu is None else database_cpu * per,
            *(u * per for u in used),
        ]
        result["rss"] = sampler.summary()
        result["memory"] = sampler.detail()
        result["changed"] = changed | (
            {"serve --workers": str(args.workers)} if args.workers is not None else {}
        )
        return result


async def main() -> None:
    """Parse arguments, run every combination, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reminders", type=int, default=3000)
    parser.add_argument(
        "--concurrency", default="", help="REMINDERS_EMBEDDED_CONCURRENCY values (default: its)"
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="REMINDERS_NAME=value",
        help="change one more setting from its default (repeatable)",
    )
    parser.add_argument("--mode", default="inprocess", help="inprocess, http, separate; a list")
    parser.add_argument("--db", default="postgresql", help="postgresql, sqlite; a list")
    parser.add_argument("--sweep-only", action="store_true", help="no dispatcher: time sweeps")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare, side by side")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workers", type=int, help="serve --workers N (default: serve's own)")
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.set_defaults(db_prefix="rr_bench_e2e_")  # the fresh databases' names
    args = parser.parse_args()
    modes = ["sweep-only"] if args.sweep_only else args.mode.split(",")
    if not set(modes) <= {"inprocess", "http", "separate", "sweep-only"}:
        parser.error("--mode: inprocess, http or separate (comma-separated)")
    args.overrides = dict(item.split("=", 1) for item in args.settings)
    if any(not name.startswith("REMINDERS_") for name in args.overrides):
        parser.error("--set: REMINDERS_NAME=value")
    databases = args.db.split(",")
    if not set(databases) <= {"postgresql", "sqlite"}:
        parser.error("--db: postgresql or sqlite (comma-separated)")
    codes = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(
        f"{args.reminders} reminders; settings given as a deployment must: "
        f"{', '.join(sorted(REQUIRED_NAMES))}; changed by flags: see each row"
    )
    print(f"{'db':>10} {'code':>8} {'mode':>10} {'conc.':>5} {'reminders/s':>11} {'total s':>8} "
          f"{'sweep s':>8} {'sweeps':>6} {'p50 s':>7} {'p99 s':>7} "
          f"{'RSS MB first/max/last':>22}  CPU µs/reminder: serve user, kernel, PostgreSQL"
          f"[, dispatch]; settings changed by flags")  # fmt: skip
    for db in databases:
        # Without a dispatcher the push concurrency changes nothing: one run per database.
        concurrencies = [int(c) for c in args.concurrency.split(",") if c] or [None]
        for concurrency in concurrencies[:1] if args.sweep_only else concurrencies:
            for _ in range(args.repeat):
                for mode in modes:
                    for label, code in codes:
                        await report_run(args, Run(db, mode, concurrency, code, label))


async def report_run(args: argparse.Namespace, run: Run) -> None:
    """One run, printed as a row of the table."""
    result = await run_once(args, run)
    first, peak, last = result["rss"]
    latency = (
        f"{result['p50']:>7.2f} {result['p99']:>7.2f}" if "p50" in result else f"{'-':>7} {'-':>7}"
    )
    print(
        f"{run.db:>10} {run.label:>8} {run.mode:>10} {run.concurrency or 'dflt':>5} "
        f"{result['rate']:>11.0f} "
        f"{result['elapsed']:>8.2f} {result['sweep']:>8.2f} {result['sweeps']:>6} {latency} "
        f"{f'{first:.0f}/{peak:.0f}/{last:.0f}':>22}  "
        + ", ".join("-" if us is None else f"{us:.0f}" for us in result["cpu_us"])
        + "; "
        + (" ".join(f"{k}={v}" for k, v in sorted(result["changed"].items())) or "none"),
        flush=True,
    )
    print(f"{'':>10} memory: {result['memory']}", flush=True)
    if result.get("slices"):
        rates = " ".join(f"{rate:.0f}" for rate in result["slices"])
        print(f"{'':>10} reminders/s per {SLICE:,} sent, first to last: {rates}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
