"""Benchmark: retention purging a million old rows while deliveries run, beside the same
deliveries without a purge, in one run.

Usage (from the repository root; needs ``wrk`` and PostgreSQL, as ``bench/push.py``)::

    .venv/bin/python bench/purge.py [--purge-rows 1000000] [--n 20000] [--concurrency 64]

Two targets, same code, same load, each on a fresh PostgreSQL database seeded (COPY) with
the N deliverable reminders of ``bench/push.py`` **and** the old rows: ``--purge-rows / 2``
reminders ``done`` 100 days ago, each with its ``sent`` ledger row (so ``--purge-rows`` rows
in all, past the default 90-day retention):

- **quiet**: ``reminders serve``; the new-deliveries and duplicate phases of ``bench/push.py``
  (``wrk``, every pre-signed delivery sent once at concurrency C);
- **purging**: the same, with ``reminders purge`` started (a separate process, as an operator
  or a cron job would run it) the moment the new-deliveries phase starts.

Printed: the phases of both targets in ``bench/push.py``'s columns (deliveries/s, p50/p99,
CPU per delivery of the server and of PostgreSQL), then the purge: rows deleted, its wall
time and rows/s, and how much of it overlapped the measured phases. Verified afterwards: every
delivered reminder has exactly one ``sent`` ledger row on both targets, every old row is gone
on the purging target and still there on the quiet one; otherwise exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import push

OLD_PREFIX = "old:"


@dataclass
class PurgeRun:
    """The purge process of the purging target."""

    started: float
    seconds: float = 0.0
    report: dict | None = None
    overlap_s: float = 0.0  # of the purge, the seconds during which a phase was measured


async def seed_old(url: str, reminders: int, days_ago: int = 100) -> None:
    """``reminders`` done reminders changed ``days_ago`` days ago, one sent ledger row each."""
    then = datetime.now(UTC) - timedelta(days=days_ago)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO customers (id, email, time_zone, opted_out_channels, created_at,"
            " updated_at) VALUES ('old-customer', 'old@example.com', 'UTC', '[]', $1, $1)",
            then,
        )
        await conn.copy_records_to_table(
            "reminders",
            columns=["id", "customer_id", "kind", "due_at", "channels", "data", "state",
                     "schedule_version", "done_at", "created_at", "updated_at"],
            records=(
                (f"{OLD_PREFIX}{i:07d}", "old-customer", "weekly_digest", then, '["email"]',
                 "{}", "done", 1, then, then, then)
                for i in range(reminders)
            ),
        )  # fmt: skip
        await conn.copy_records_to_table(
            "send_records",
            columns=["reminder_id", "channel", "provider", "state", "attempt_count",
                     "attempt_budget_start", "idempotency_key", "redrive_count", "sent_at",
                     "created_at", "updated_at", "outcome"],
            records=(
                (f"{OLD_PREFIX}{i:07d}", "email", "outbox", "sent", 1, 0, f"old-key-{i}", 0,
                 then, then, then, "sent")
                for i in range(reminders)
            ),
        )  # fmt: skip
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


VERIFY = {
    "old rows": (
        f"SELECT (SELECT count(*) FROM reminders WHERE id LIKE '{OLD_PREFIX}%')"
        f" + (SELECT count(*) FROM send_records WHERE reminder_id LIKE '{OLD_PREFIX}%')"
    ),
    "delivered reminders without exactly one sent row": (
        "SELECT count(*) FROM reminders r WHERE r.id LIKE 'bench:%' AND (SELECT count(*)"
        " FROM send_records s WHERE s.reminder_id = r.id AND s.state = 'sent') <> 1"
    ),
}


async def verify(url: str, *, old_rows: int) -> list[str]:
    """Problems after a target's run."""
    conn = await asyncpg.connect(url)
    try:
        found = {name: await conn.fetchval(sql) for name, sql in VERIFY.items()}
    finally:
        await conn.close()
    expected = {"old rows": old_rows, "delivered reminders without exactly one sent row": 0}
    return [f"{k}: {found[k]} (expected {expected[k]})" for k in found if found[k] != expected[k]]


def start_purge(env: dict[str, str], log: Path) -> subprocess.Popen:
    """``reminders purge`` as its own process, its JSON report on stdout."""
    command = [push.PYTHON, "-c", "from app.cli import main; main()", "purge"]
    return subprocess.Popen(
        command, cwd=push.ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("wb"), text=True
    )


def run_target(
    name: str, plan: push.Plan, args: argparse.Namespace, work: Path, secret: bytes
) -> tuple[list[push.Phase], PurgeRun | None, list[str]]:
    """One target: fresh database, seed, serve, deliveries (and the purge), verify."""
    target = push.Target(name, push.ROOT)
    database = f"rr_purge_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(push.create_database(args.pg_admin_url, database))
    try:
        url = push.pg_url(args.pg_admin_url, database, driver="postgresql+asyncpg")
        push.migrate(target, url)
        asyncio.run(push.seed(push.pg_url(args.pg_admin_url, database), plan.total))
        asyncio.run(seed_old(push.pg_url(args.pg_admin_url, database), args.purge_rows // 2))
        env = push.service_env(target, url, secret, args.outboxes / name, args)
        phases, purge = serve_and_measure(target, plan, args, work, env, database)
        old_left = 0 if purge is not None else 2 * (args.purge_rows // 2)
        problems = asyncio.run(verify(push.pg_url(args.pg_admin_url, database), old_rows=old_left))
        if purge is not None and (purge.report is None or not purge.report.get("complete")):
            problems.append(f"purge did not complete: {purge.report}")
        return phases, purge, problems
    finally:
        asyncio.run(push.drop_database(args.pg_admin_url, database))


def serve_and_measure(
    target: push.Target,
    plan: push.Plan,
    args: argparse.Namespace,
    work: Path,
    env: dict[str, str],
    database: str,
) -> tuple[list[push.Phase], PurgeRun | None]:
    """Warm-up, then the new and duplicate phases; the purging target purges meanwhile."""
    port = push.free_port()
    command = [push.PYTHON, "-c", "from app.cli import main; main()", "serve"]
    command += ["--port", str(port), "--no-migrate"]
    with push.serving(
        command, cwd=push.ROOT, env=env, log=work / f"{target.name}.log",
        ready_path="/healthz", port=port,
    ) as server:  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        push.run_wrk(url, plan.warmup, args=args)
        meter = push.CpuMeter(server.pid, database)
        purging = target.name == "purging"
        process = start_purge(env, work / "purge.log") if purging else None
        purge = PurgeRun(time.monotonic()) if purging else None
        phases, windows = [], []
        for phase, outcome in (("new", "sent"), ("duplicate", "duplicate")):
            meter.mark()
            began = time.monotonic()
            result = push.run_wrk(url, plan.main, args=args)
            windows.append((began, time.monotonic()))
            phases.append(push.Phase(target.name, phase, 200, outcome, result, *meter.read()))
        if process is not None and purge is not None:
            stdout, _ = process.communicate()
            finished = time.monotonic()
            purge.seconds = finished - purge.started
            purge.report = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
            purge.overlap_s = sum(
                max(0.0, min(end, finished) - max(begin, purge.started)) for begin, end in windows
            )
        return phases, purge


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (the load options mean what they mean in bench/push.py)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--purge-rows", type=int, default=1_000_000, help="old rows: reminders + ledger rows")
    add("--n", type=int, default=20000, help="deliveries per phase (default 20000)")
    add("--concurrency", "-c", type=int, default=64)
    add("--threads", type=int, default=2)
    add("--warmup", type=int, default=500)
    add("--max-seconds", type=int, default=900)
    add("--pg-admin-url", default=os.environ.get("REMINDERS_BENCH_PG_ADMIN_URL", push.PG_ADMIN_URL))
    args = parser.parse_args(argv)
    args.paced, args.paced_n, args.outbox_fsync, args.env = False, 0, False, []
    return args


def main(argv: list[str] | None = None) -> int:
    """Both targets, one table, the purge's figures; 1 when a verification failed."""
    args = parse_args(argv)
    secret = secrets.token_hex(24).encode()
    rows, problems, purge = [], [], None
    outbox_base = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with (
        tempfile.TemporaryDirectory(prefix="rr-purge-") as directory,
        tempfile.TemporaryDirectory(prefix="rr-purge-outbox-", dir=outbox_base) as outboxes,
    ):
        work, args.outboxes = Path(directory), Path(outboxes)
        plan = push.make_plan(work, secret, args)
        for name in ("quiet", "purging"):
            phases, ran, found = run_target(name, plan, args, work, secret)
            rows += phases
            problems += [f"{name}: {problem}" for problem in found]
            purge = ran or purge
    print(f"n={args.n} concurrency={args.concurrency} old rows={args.purge_rows}")
    print(push.HEADER)
    for phase in rows:
        print(phase.row())
    if purge is not None and purge.report is not None:
        deleted = purge.report["reminders"] + purge.report["send_records"]
        print(
            f"purge: {deleted} rows ({purge.report['reminders']} reminders +"
            f" {purge.report['send_records']} ledger rows) in {purge.seconds:.1f} s"
            f" = {deleted / purge.seconds:,.0f} rows/s; {purge.overlap_s:.1f} s of it"
            " while the phases above were measured"
        )
    for problem in problems:
        print("VERIFY FAILED", problem)
    return 1 if problems or any(p.unexpected() for p in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
