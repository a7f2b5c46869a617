"""Benchmark of the push hot path next to a bare FastAPI route: same server, same load generator.

Usage (from the repository root; needs ``wrk``: ``apt-get install -y wrk``, and PostgreSQL)::

    .venv/bin/python bench/push.py [--n 20000] [--concurrency 64] [--repeat 3] [--paced]

Each repetition, on 127.0.0.1:

1. **bare**: ``bench/bare_app.py`` (one POST route taking a JSON body → 204) served exactly as
   ``reminders serve`` serves the service (uvicorn with ``serve``'s default worker count on
   PostgreSQL, one per core up to 4, uvloop + httptools, access log
   off); ``wrk`` sends N signed push requests at concurrency C.
2. **the service**: a fresh PostgreSQL database (``--pg-admin-url``, default
   ``postgresql://postgres@127.0.0.1:5432/postgres``), migrated with
   ``app.db.migrations.upgrade_to_head``, seeded by COPY with N customers and reminders in
   state ``enqueued``; ``reminders serve`` with the outbox provider in a temporary directory.
   Then the same ``wrk`` script sends the N deliveries (**new**: each reminder → ``sent``),
   then the same N messages again (**duplicate**: each → ``duplicate``, no provider call).
   With ``--paced`` two more phases offer a fixed rate (0.20 and 0.50 of this repetition's
   bare rate, the throughput the hot path is held to) to measure p99 *at those rates*
   (``--paced-of-peak 0.5``: at half of the target's own new and duplicate rates just
   measured in the same repetition); closed-loop latency at concurrency C is mostly
   queueing (mean ≈ C / rate). Afterwards
   the database must hold exactly one ``sent`` ledger row per reminder, every reminder
   ``done``, one outbox file each.

Every phase is preceded by a warm-up of ``--warmup`` requests on fresh reminders. Any answer
other than the expected status and outcome, and any wrk socket error, is counted and printed;
the script exits 1 when one occurred or the verification failed.

**Outbox fsync is off** by default (``--outbox-fsync`` turns it on): the outbox stands in for a
provider's network call, and an fsync per message measures the disk, not the hot path.

**The outbox lives on /dev/shm** (tmpfs) when it exists; ``--outbox-base DIR`` puts its
temporary directory elsewhere. Here PostgreSQL's WAL shares the ext4 filesystem of /tmp, and
its commit fdatasyncs make every file creation on that filesystem wait on the journal:
measured, a file create costs ~30 µs of kernel CPU alone and 350-800 µs next to 6,000
commits/s. That is the machine's disk layout, not the receiver; ``--outbox-base /tmp``
measures it (new deliveries then cost ~0.4-0.9 ms more CPU each).

**Side by side**: ``--variant NAME=SOURCE[,KEY=VALUE...]`` adds a service started from another
source tree (e.g. ``git worktree add /tmp/rr-before <commit>``) and/or with other
``REMINDERS_*`` settings, measured in the same repetitions (the order rotates each repetition
so drift does not favour one target). The current tree is the target ``service``.

**Push authentication**: first, each push format's ``authenticate`` and ``parse`` are timed in
process (``bench/push_auth.py``: HMAC, query token, Google OIDC with cached keys, SNS
signatures with a cached certificate, QStash JWT) so their per-delivery cost stands next to
the Infrai HMAC in the same run.

**Push formats through the route**: ``--formats hmac,cloudtasks-oidc,pubsub-oidc,sns,qstash``
(also ``cloudtasks-hmac``, ``pubsub-token``) replaces the target ``service`` with one target
per format: the current tree configured for that queue kind, sent the same deliveries signed
as that queue signs them (``bench/push_formats.py``: Google OIDC tokens and SNS signatures
made with test keys whose certificates are served on loopback and cached by the service,
QStash JWTs), written just before each target's run so every token is fresh. The last table
puts each format's rates and server CPU per request next to ``hmac``'s.

Output: one table per repetition, the medians, and as the last line
``ratios (service): new/bare=… duplicate/bare=…`` (medians of the per-repetition ratios).
Columns: deliveries/s, p50/p99 latency in ms (wrk), CPU time of the server process (all its
threads; ``sys`` is the kernel's share) and of its PostgreSQL backends in µs per request
(less sensitive to a shared machine than throughput, though contention inflates it too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: bench/ and tests/ import from the root

from app.cli.serve_workers import default_workers, usable_cores  # noqa: E402
from bench.process_tree import (  # noqa: E402
    CpuSample,
    cpu_since,
    cpu_split,
    tree_cpu,
    worker_count,
)

LUA_SCRIPT = ROOT / "bench" / "deliveries.lua"
PYTHON = sys.executable
QUEUE = "reminders"
PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
# The bare route is served with as many workers as ``serve`` runs by default here.
WORKERS = default_workers(is_sqlite=False, cores=usable_cores())


@dataclass(frozen=True)
class Target:
    """A service to measure: a source tree plus extra environment."""

    name: str
    source: Path
    env: dict[str, str] = field(default_factory=dict)
    # --formats: writes this target's requests (signed as its queue signs them) before each
    # of its runs; None: the run's shared Infrai-signed files (bench/push_formats.py).
    writer: Callable[[Path, bytes, range], None] | None = None


@dataclass
class Phase:
    """One wrk run against one target."""

    target: str
    phase: str
    expected_status: int
    expected_outcome: str | None
    wrk: dict[str, Any]
    server_cpu_s: float
    db_cpu_s: float
    server_sys_s: float
    offered: float = 0.0  # paced phases: the rate wrk offered (0: closed loop)

    @property
    def requests(self) -> int:
        """Answers received."""
        return int(self.wrk["received"])

    @property
    def rate(self) -> float:
        """Answered requests per second (first send to last answer)."""
        return self.requests / self.wrk["elapsed_s"] if self.wrk["elapsed_s"] else 0.0

    @property
    def p50_ms(self) -> float:
        """Median latency in ms."""
        return self.wrk["p50_us"] / 1000

    @property
    def p99_ms(self) -> float:
        """99th percentile latency in ms."""
        return self.wrk["p99_us"] / 1000

    def unexpected(self) -> dict[str, int]:
        """Everything that is not the expected answer: statuses, outcomes, socket errors."""
        bad = {
            f"status {k}": v
            for k, v in self.wrk["statuses"].items()
            if int(k) != self.expected_status
        }
        if self.expected_outcome is not None:
            bad |= {
                f"outcome {k}": v
                for k, v in self.wrk["outcomes"].items()
                if k != self.expected_outcome
            }
        bad |= {f"wrk {k} error": v for k, v in self.wrk["errors"].items() if v and k != "status"}
        missing = self.wrk["planned"] - self.wrk["received"]
        if missing:
            bad["unanswered"] = missing
        return bad

    def row(self) -> str:
        """One line of the report table."""
        n = max(self.requests, 1)
        bad = sum(self.unexpected().values())
        return (
            f"  {self.target:<14} {self.phase:<22} {self.requests:>8} {self.rate:>12.1f} "
            f"{self.p50_ms:>8.1f} {self.p99_ms:>8.1f} {self.server_cpu_s * 1e6 / n:>9.0f} "
            f"{self.server_sys_s * 1e6 / n:>8.0f} {self.db_cpu_s * 1e6 / n:>8.0f} {bad:>6}"
            + (f"  offered {self.offered:.0f}/s" if self.offered else "")
        )


HEADER = (
    f"  {'target':<14} {'phase':<22} {'requests':>8} {'deliveries/s':>12} {'p50 ms':>8} "
    f"{'p99 ms':>8} {'srv µs/r':>9} {'sys µs/r':>8} {'pg µs/r':>8} {'bad':>6}"
)


# ---------------------------------------------------------------- requests and the generator


def write_requests(path: Path, secret: bytes, ids: range) -> None:
    """One signed Infrai push per reminder id, in the line format deliveries.lua reads."""
    from app.adapters.queues.infrai.push_format import sign

    with path.open("w") as out:
        for i in ids:
            body = orjson.dumps(
                {
                    "message_id": f"bench-msg-{i}",
                    "payload": {
                        "v": 1,
                        "reminder_id": reminder_id(i),
                        "channel": "email",
                        "schedule_version": 1,
                    },
                }
            )
            out.write(f"/push/{QUEUE}\t{sign(secret, body)}\t{body.decode()}\n")


def reminder_id(i: int) -> str:
    """The id of the i-th seeded reminder."""
    return f"bench:{i:07d}"


def run_wrk(url: str, requests: Path, *, args: argparse.Namespace, rate: float = 0) -> dict:
    """Send every request of the file once through wrk; its WRK_RESULT as a dict."""
    command = [
        "wrk", f"-t{args.threads}", f"-c{args.concurrency}", f"-d{args.max_seconds}s",
        "--timeout", "30s", "-s", str(LUA_SCRIPT), url, "--",
        str(requests), str(args.threads), str(rate),
    ]  # fmt: skip
    wrk = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wrk.stderr is not None
    done, errors = 0, []
    for line in wrk.stderr:  # wrk waits out -d; stop it once every thread has finished
        if line.strip() == "BENCH_THREAD_DONE":
            done += 1
            if done == args.threads:
                wrk.send_signal(signal.SIGINT)
        else:
            errors.append(line)
    stdout, _ = wrk.communicate()
    result_lines = [x for x in stdout.splitlines() if x.startswith("WRK_RESULT ")]
    if not result_lines:
        raise RuntimeError(f"wrk gave no result: {stdout}{''.join(errors)}")
    return json.loads(result_lines[-1].removeprefix("WRK_RESULT "))


# ---------------------------------------------------------------- processes


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 once it has exited)."""
    try:
        return sum(cpu_split(pid))
    except FileNotFoundError:
        return 0.0


def backend_pids(database: str) -> list[int]:
    """PostgreSQL backends connected to a database (by their process title)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres: ") and f" {database} ".encode() in title:
            pids.append(int(entry.name))
    return pids


class CpuMeter:
    """CPU seconds spent by the server (its workers included) and the database's backends
    between marks."""

    def __init__(self, server_pid: int, database: str | None) -> None:
        self.server_pid, self.database = server_pid, database
        self._server: CpuSample = {}
        self._db: dict[int, float] = {}

    def _db_snapshot(self) -> dict[int, float]:
        if self.database is None:
            return {}
        return {pid: cpu_seconds(pid) for pid in backend_pids(self.database)}

    def mark(self) -> None:
        """Start counting from now."""
        self._server, self._db = tree_cpu(self.server_pid), self._db_snapshot()

    def read(self) -> tuple[float, float, float]:
        """(server, database, server's system share) CPU seconds since the mark."""
        user, system = cpu_since(self._server, tree_cpu(self.server_pid))
        now = self._db_snapshot()
        db = sum(value - self._db.get(pid, 0.0) for pid, value in now.items())
        return user + system, db, system


@contextmanager
def serving(
    command: list[str], *, cwd: Path, env: dict[str, str], log: Path, ready_path: str, port: int
) -> Iterator[subprocess.Popen]:
    """Run a server process until the block ends; wait until it answers HTTP."""
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
        try:
            wait_until_answering(server, f"http://127.0.0.1:{port}{ready_path}", log)
            wait_for_every_worker(server, log)
            yield server
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def wait_for_every_worker(server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Until each uvicorn worker of the server has logged its startup (the port answers once
    the first one has): a worker still importing would count in the measured CPU."""
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count("startup complete") < worker_count(server.pid):
        if time.monotonic() > deadline or server.poll() is not None:
            raise RuntimeError(f"not every worker started; see {log}")
        time.sleep(0.1)


def wait_until_answering(server: subprocess.Popen, url: str, log: Path) -> None:
    """Poll a URL until the server answers anything over HTTP (deadline 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"server exited early; see {log}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # an HTTP error answer is an answer
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not answer {url} within 60 s; see {log}")


# ---------------------------------------------------------------- database


def pg_url(admin_url: str, database: str, *, driver: str = "postgresql") -> str:
    """The URL of another database on the admin URL's server."""
    return f"{admin_url.rsplit('/', 1)[0].replace('postgresql', driver, 1)}/{database}"


async def create_database(admin_url: str, name: str) -> None:
    """CREATE DATABASE name (dropping a leftover of the same name)."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


async def drop_database(admin_url: str, name: str) -> None:
    """DROP DATABASE name."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def migrate(target: Target, database_url: str) -> None:
    """upgrade_to_head with the target's own code (its migrations)."""
    code = "import sys; from app.db.migrations import upgrade_to_head; upgrade_to_head(sys.argv[1])"
    subprocess.run(
        [PYTHON, "-c", code, database_url], cwd=target.source, env=python_env(target), check=True
    )


CUSTOMER_COLUMNS = [
    "id",
    "email",
    "webhook_url",
    "time_zone",
    "opted_out_channels",
    "unsubscribed_at",
    "created_at",
    "updated_at",
]
REMINDER_COLUMNS = [
    "id",
    "customer_id",
    "kind",
    "due_at",
    "expires_at",
    "channels",
    "data",
    "state",
    "schedule_version",
    "sweep_claimed_until",
    "enqueued_at",
    "enqueued_message_ids",
    "cancelled_at",
    "done_at",
    "created_at",
    "updated_at",
]


def seed_rows(count: int, now: datetime) -> tuple[list[tuple], list[tuple]]:
    """Customer and reminder records in COPY column order (unset columns are NULL)."""
    data = json.dumps({"name": "Ada", "week": "2026-W33", "items": ["one thing", "another"]})
    customers, reminders = [], []
    for i in range(count):
        customer_id = f"cust-{i:07d}"
        customer = {
            "id": customer_id,
            "email": f"{customer_id}@example.com",
            "time_zone": "Europe/Berlin",
            "opted_out_channels": "[]",
            "created_at": now,
            "updated_at": now,
        }
        reminder = {
            "id": reminder_id(i),
            "customer_id": customer_id,
            "kind": "weekly_digest",
            "due_at": now,
            "channels": '["email"]',
            "data": data,
            "state": "enqueued",
            "schedule_version": 1,
            "enqueued_at": now,
            "created_at": now,
            "updated_at": now,
        }
        customers.append(tuple(customer.get(c) for c in CUSTOMER_COLUMNS))
        reminders.append(tuple(reminder.get(c) for c in REMINDER_COLUMNS))
    return customers, reminders


async def seed(url: str, count: int) -> None:
    """``count`` customers, each with one enqueued email reminder due now (COPY)."""
    customers, reminders = seed_rows(count, datetime.now(UTC))
    conn = await asyncpg.connect(url)
    try:
        await conn.copy_records_to_table("customers", records=customers, columns=CUSTOMER_COLUMNS)
        await conn.copy_records_to_table("reminders", records=reminders, columns=REMINDER_COLUMNS)
        # Only the seeded tables. An ANALYZE of the empty ledger records "0 rows": the
        # generic plan each ledger connection caches after its fifth execution then scans
        # send_records instead of using its key, and keeps scanning as the ledger grows
        # (nothing re-analyzes it during a run; this server runs without autovacuum).
        # Which connections got such a plan varied from run to run and read as a
        # slowdown of one tree or another (measured with pg_stat_statements and
        # auto_explain). Never analyzed, as after a deployment, the planner assumes a
        # table of some size and uses the key.
        await conn.execute("ANALYZE customers, reminders")
    finally:
        await conn.close()


VERIFY = {
    "reminders": "SELECT count(*) FROM reminders",
    "reminders done": "SELECT count(*) FROM reminders WHERE state = 'done'",
    "ledger rows": "SELECT count(*) FROM send_records",
    "sent ledger rows": "SELECT count(*) FROM send_records WHERE state = 'sent'",
    "reminders without exactly one sent row": (
        "SELECT count(*) FROM reminders r WHERE (SELECT count(*) FROM send_records s "
        "WHERE s.reminder_id = r.id AND s.state = 'sent') <> 1"
    ),
    "ledger rows with attempt_count <> 1": (
        "SELECT count(*) FROM send_records WHERE attempt_count <> 1"
    ),
    "dead letters": "SELECT count(*) FROM dead_letters",
}


async def verify(url: str, count: int, outbox: Path) -> list[str]:
    """Problems with the database after the run (empty when all is as it must be)."""
    conn = await asyncpg.connect(url)
    try:
        found = {name: await conn.fetchval(sql) for name, sql in VERIFY.items()}
    finally:
        await conn.close()
    found["outbox files"] = sum(1 for _ in (outbox / "email").glob("*.eml"))
    expected = {name: count for name in found} | {
        "reminders without exactly one sent row": 0,
        "ledger rows with attempt_count <> 1": 0,
        "dead letters": 0,
    }
    return [f"{k}: {found[k]} (expected {expected[k]})" for k in found if found[k] != expected[k]]


# ---------------------------------------------------------------- one repetition


@dataclass
class Plan:
    """What every repetition sends: request files over disjoint reminder ranges."""

    warmup: Path
    main: Path
    paced: Path | None
    total: int  # reminders to seed per service run


def make_plan(
    directory: Path,
    secret: bytes,
    args: argparse.Namespace,
    write: Callable[[Path, bytes, range], None] = write_requests,
) -> Plan:
    """Write the request files once; every target gets the same bytes."""
    w, n, p = args.warmup, args.n, args.paced_n if args.paced else 0
    plan = Plan(directory / "warmup.txt", directory / "main.txt", None, w + n + p)
    write(plan.warmup, secret, range(w))
    write(plan.main, secret, range(w, w + n))
    if p:
        plan.paced = directory / "paced.txt"
        write(plan.paced, secret, range(w + n, w + n + p))
    return plan


def plan_for(
    target: Target, plan: Plan, args: argparse.Namespace, work: Path, secret: bytes
) -> Plan:
    """The shared plan, or the target's own requests written just now (fresh tokens)."""
    if target.writer is None:
        return plan
    directory = work / f"requests-{target.name}"
    directory.mkdir(exist_ok=True)
    return make_plan(directory, secret, args, write=target.writer)


def python_env(target: Target, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process running the target's code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    env["PYTHONPATH"] = str(target.source)
    return env | (extra or {})


def bench_bare(plan: Plan, args: argparse.Namespace, work: Path) -> list[Phase]:
    """The bare route: warm-up, then the N requests."""
    port = free_port()
    command = [PYTHON, "-m", "bench.bare_app", "--port", str(port), "--workers", str(WORKERS)]
    base = Target("bare", ROOT)
    with serving(
        command, cwd=ROOT, env=python_env(base), log=work / "bare.log", ready_path="/", port=port
    ) as server:
        url = f"http://127.0.0.1:{port}"
        run_wrk(url, plan.warmup, args=args)
        meter = CpuMeter(server.pid, None)
        meter.mark()
        result = run_wrk(url, plan.main, args=args)
        return [Phase("bare", "bare route", 204, None, result, *meter.read())]


def service_env(target: Target, database_url: str, secret: bytes, outbox: Path, args) -> dict:
    """REMINDERS_* settings of a benchmarked service."""
    settings = {
        "REMINDERS_DATABASE_URL": database_url,
        "REMINDERS_PUSH_SECRETS": secret.decode(),
        "REMINDERS_CRON_TOKEN": secrets.token_hex(16),
        "REMINDERS_API_TOKEN": secrets.token_hex(16),
        "REMINDERS_ADMIN_TOKEN": secrets.token_hex(16),
        "REMINDERS_METRICS_TOKEN": secrets.token_hex(16),
        "REMINDERS_OUTBOX_DIR": str(outbox),
        "REMINDERS_OUTBOX_FSYNC": "1" if args.outbox_fsync else "0",
        "REMINDERS_QUEUE": "memory",  # nothing is published here: no background dispatcher
    }
    return python_env(target, settings | dict(args.env) | target.env)


def bench_service(
    target: Target,
    plan: Plan,
    args: argparse.Namespace,
    work: Path,
    secret: bytes,
    bare_rate: float,
) -> tuple[list[Phase], list[str]]:
    """One target: fresh database, seed, serve, new then duplicate deliveries, verify."""
    database = f"rr_bench_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(create_database(args.pg_admin_url, database))
    try:
        migrate(target, pg_url(args.pg_admin_url, database, driver="postgresql+asyncpg"))
        asyncio.run(seed(pg_url(args.pg_admin_url, database), plan.total))
        env = service_env(
            target, pg_url(args.pg_admin_url, database, driver="postgresql+asyncpg"), secret,
            args.outboxes / f"{target.name}-{database}", args,
        )  # fmt: skip
        phases = run_service_phases(target, plan, args, work, env, database, bare_rate)
        # A variant may point the outbox elsewhere; its files stay until the run ends
        # (deleting thousands of files between targets slows the next one).
        outbox = Path(env["REMINDERS_OUTBOX_DIR"])
        problems = asyncio.run(verify(pg_url(args.pg_admin_url, database), plan.total, outbox))
        return phases, problems
    finally:
        if not args.keep_db:
            asyncio.run(drop_database(args.pg_admin_url, database))


def run_service_phases(
    target: Target,
    plan: Plan,
    args: argparse.Namespace,
    work: Path,
    env: dict[str, str],
    database: str,
    bare_rate: float,
) -> list[Phase]:
    """Warm-up, new, duplicate (and the paced phases) against a running service."""
    port = free_port()
    command = [PYTHON, "-c", "from app.cli import main; main()", "serve", "--port", str(port)]
    command += ["--no-migrate"]
    log = work / f"service-{target.name}-{database}.log"
    with serving(
        command, cwd=target.source, env=env, log=log, ready_path="/healthz", port=port
    ) as server:
        url = f"http://127.0.0.1:{port}"
        run_wrk(url, plan.warmup, args=args)
        meter = CpuMeter(server.pid, database)
        phases = []
        runs: list[tuple[str, Path, str, float]] = [
            ("new", plan.main, "sent", 0.0),
            ("duplicate", plan.main, "duplicate", 0.0),
        ]
        for name, requests, outcome, rate in runs:
            meter.mark()
            result = run_wrk(url, requests, args=args, rate=rate)
            phases.append(Phase(target.name, name, 200, outcome, result, *meter.read(), rate))
        if plan.paced is not None:  # named by the target, so repetitions line up
            for name, outcome, rate in paced_rates(args, bare_rate, phases[0].rate, phases[1].rate):
                meter.mark()
                result = run_wrk(url, plan.paced, args=args, rate=rate)
                phases.append(Phase(target.name, name, 200, outcome, result, *meter.read(), rate))
        return phases


def paced_rates(
    args, bare_rate: float, new_peak: float, duplicate_peak: float
) -> list[tuple[str, str, float]]:
    """(phase name, expected outcome, offered rate) of the two paced phases: a fraction of
    this target's own peak just measured (``--paced-of-peak``), fixed rates, or by default
    0.20 and 0.50 of the bare route's rate."""
    if args.paced_of_peak:
        share = args.paced_of_peak
        return [
            (f"new @{share:.2f} peak", "sent", round(share * new_peak)),
            (f"duplicate @{share:.2f} peak", "duplicate", round(share * duplicate_peak)),
        ]
    new_rate = args.new_rate or round(0.20 * bare_rate)
    dup_rate = args.duplicate_rate or round(0.50 * bare_rate)
    new_name = f"new @{new_rate:.0f}/s" if args.new_rate else "new @0.20 bare"
    dup_name = f"dup @{dup_rate:.0f}/s" if args.duplicate_rate else "duplicate @0.50 bare"
    return [(new_name, "sent", new_rate), (dup_name, "duplicate", dup_rate)]


def repetition(
    index: int, targets: list[Target], plan: Plan, args, work: Path, secret: bytes
) -> tuple[list[Phase], list[str]]:
    """Bare and every target once; the order rotates with the repetition index."""
    order: list[Target | None] = [None, *targets]
    shift = index % len(order)
    order = order[shift:] + order[:shift]
    if args.paced and order[0] is not None:  # paced rates derive from the bare rate
        order.remove(None)
        order.insert(0, None)
    phases: list[Phase] = []
    problems: list[str] = []
    bare_rate = 0.0
    for target in order:
        if target is None:
            phases += bench_bare(plan, args, work)
            bare_rate = phases[-1].rate
            continue
        target_plan = plan_for(target, plan, args, work, secret)
        got, bad = bench_service(target, target_plan, args, work, secret, bare_rate)
        phases += got
        problems += [f"{target.name}: {p}" for p in bad]
    return phases, problems


# ---------------------------------------------------------------- report


def ratios(phases: list[Phase], target: str) -> tuple[float, float]:
    """(new/bare, duplicate/bare) deliveries per second."""
    rate = {(p.target, p.phase): p.rate for p in phases}
    bare = rate[("bare", "bare route")]
    return rate[(target, "new")] / bare, rate[(target, "duplicate")] / bare


def print_medians(all_phases: list[list[Phase]], targets: list[Target]) -> None:
    """Median of each figure over the repetitions."""
    keys = [(p.target, p.phase) for p in all_phases[0]]
    print(f"\nmedians over {len(all_phases)} repetition(s):")
    print(HEADER.replace("deliveries/s", "  median /s"))
    for key in sorted(keys, key=lambda k: (k[0] != "bare", k)):
        runs = [p for phases in all_phases for p in phases if (p.target, p.phase) == key]
        if not runs:
            continue
        n = statistics.median(p.requests for p in runs) or 1
        print(
            f"  {key[0]:<14} {key[1][:22]:<22} {n:>8.0f} "
            f"{statistics.median(p.rate for p in runs):>12.1f} "
            f"{statistics.median(p.p50_ms for p in runs):>8.1f} "
            f"{statistics.median(p.p99_ms for p in runs):>8.1f} "
            f"{statistics.median(p.server_cpu_s for p in runs) * 1e6 / n:>9.0f} "
            f"{statistics.median(p.server_sys_s for p in runs) * 1e6 / n:>8.0f} "
            f"{statistics.median(p.db_cpu_s for p in runs) * 1e6 / n:>8.0f} "
            f"{sum(sum(p.unexpected().values()) for p in runs):>6}"
        )
    for target in targets:
        pairs = [ratios(phases, target.name) for phases in all_phases]
        print(
            f"  {target.name}: new/bare {', '.join(f'{a:.3f}' for a, _ in pairs)}; "
            f"duplicate/bare {', '.join(f'{b:.3f}' for _, b in pairs)}"
        )


# ---------------------------------------------------------------- command line


def parse_setting(spec: str) -> tuple[str, str]:
    """KEY=VALUE → (KEY, VALUE)."""
    key, _, value = spec.partition("=")
    return key, value


def parse_variant(spec: str) -> Target:
    """NAME=SOURCE[,KEY=VALUE...] → Target."""
    name, _, rest = spec.partition("=")
    source, *settings = rest.split(",")
    env = dict(item.split("=", 1) for item in settings)
    return Target(name, (ROOT / source).resolve() if source else ROOT, env)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--n", type=int, default=20000, help="deliveries per phase (default 20000)")
    add("--concurrency", "-c", type=int, default=64, help="connections in flight (default 64)")
    add("--threads", type=int, default=2, help="wrk threads (default 2)")
    add("--warmup", type=int, default=500, help="warm-up requests before each target")
    add("--repeat", type=int, default=1, help="repetitions; medians are reported")
    add("--paced", action="store_true", help="also measure latency at the target rates")
    add("--paced-n", type=int, default=5000, help="deliveries per paced phase")
    add("--new-rate", type=float, default=0, help="paced new rate (default 0.20 of bare)")
    add("--duplicate-rate", type=float, default=0, help="paced rate (default 0.50 of bare)")
    add("--paced-of-peak", type=float, default=0, help="paced at this share of the peak")
    add("--outbox-fsync", action="store_true", help="fsync every outbox file (default off)")
    add("--outbox-base", type=Path, help="parent of the outbox temp dir (default /dev/shm)")
    add("--env", action="append", default=[], type=parse_setting, help="KEY=VALUE for services")
    add("--variant", action="append", default=[], type=parse_variant, help="see above")
    add("--no-service", action="store_true", help="measure only the variants (and bare)")
    add("--pg-admin-url", default=os.environ.get("REMINDERS_BENCH_PG_ADMIN_URL", PG_ADMIN_URL))
    add("--keep-db", action="store_true", help="keep the benchmark databases")
    add("--max-seconds", type=int, default=900, help="upper bound of one wrk run")
    add("--json", type=Path, help="also write every phase's raw figures here")
    add("--auth-iterations", type=int, default=2000, help="per push format; 0: skip")
    add("--formats", default="", help="push formats through the route, e.g. hmac,sns (below)")
    args = parser.parse_args(argv)
    if args.outbox_base is None and Path("/dev/shm").is_dir():
        args.outbox_base = Path("/dev/shm")
    if args.n < args.concurrency or args.warmup < args.concurrency:
        parser.error("--n and --warmup must be at least --concurrency")
    return args


def format_names(spec: str) -> list[str]:
    """The --formats names (checked), or none."""
    if not spec:
        return []
    from bench.push_formats import parse_formats

    return parse_formats(spec)


def format_targets(formats: list[str], work: Path, stack: ExitStack) -> list[Target]:
    """One target per push format, its certificate servers kept running by ``stack``."""
    if not formats:
        return []
    from bench.push_formats import format_env, loopback_keys, request_writer

    keys = stack.enter_context(loopback_keys(work))
    return [
        Target(name, ROOT, format_env(name, keys), request_writer(name, keys)) for name in formats
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every answer was the expected one and the ledger is right."""
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk is required: apt-get install -y wrk", file=sys.stderr)
        return 2
    formats = format_names(args.formats)
    # With --formats, the format "hmac" is the current tree's service: no second copy of it.
    service = [] if args.no_service or formats else [Target("service", ROOT)]
    targets = service + args.variant
    secret = secrets.token_hex(24).encode()
    print(
        f"n={args.n} concurrency={args.concurrency} wrk threads={args.threads} "
        f"warmup={args.warmup} outbox fsync={'on' if args.outbox_fsync else 'off'} "
        f"cpus={os.cpu_count()} workers={WORKERS} (serve's default on PostgreSQL; bare too) "
        f"targets={', '.join([*formats, *(t.name for t in targets)])}",
        flush=True,
    )
    if args.auth_iterations:
        from bench.push_auth import print_auth_costs

        print_auth_costs(args.auth_iterations)
    all_phases, all_problems = [], []
    with (
        tempfile.TemporaryDirectory(prefix="rr-bench-") as directory,
        tempfile.TemporaryDirectory(prefix="rr-bench-outbox-", dir=args.outbox_base) as outboxes,
        ExitStack() as stack,
    ):
        work, args.outboxes = Path(directory), Path(outboxes)
        print(f"outbox folders in {outboxes}", flush=True)
        targets = format_targets(formats, work, stack) + targets
        plan = make_plan(work, secret, args)
        for index in range(args.repeat):
            phases, problems = repetition(index, targets, plan, args, work, secret)
            print(f"\nrepetition {index + 1}:\n{HEADER}", flush=True)
            for phase in phases:
                print(phase.row())
                if phase.unexpected():
                    print(f"    unexpected answers: {phase.unexpected()}")
            for problem in problems:
                print(f"    VERIFY FAILED {problem}")
            all_phases.append(phases)
            all_problems += problems
    if args.json:
        args.json.write_text(json.dumps([[vars(p) for p in ph] for ph in all_phases], indent=1))
    print_medians(all_phases, targets)
    if formats:
        from bench.push_formats import print_format_summary

        print_format_summary(all_phases, formats)
    failed = all_problems or any(p.unexpected() for ph in all_phases for p in ph)
    print(f"verification: {'FAILED' if failed else 'every reminder has exactly one sent row'}")
    if targets:
        main_target = targets[0].name
        pairs = [ratios(phases, main_target) for phases in all_phases]
        new = statistics.median(a for a, _ in pairs)
        dup = statistics.median(b for _, b in pairs)
        print(f"ratios ({main_target}): new/bare={new:.3f} duplicate/bare={dup:.3f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
