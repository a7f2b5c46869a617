"""Benchmark: ``reminders sweep`` of N due reminders onto the embedded queue, as a user runs it.

Usage (from the repository root; PostgreSQL on 127.0.0.1)::

    .venv/bin/python bench/sweep.py [--reminders 1000000] [--db postgresql,sqlite]
                                    [--baseline PATH] [--repeat 1]

For each database (and repetition): a fresh database (see ``bench/e2e.py``: PostgreSQL seeded
by COPY, SQLite by executemany), migrated, holding N customers and N ``scheduled`` email
reminders due now; then ``reminders sweep`` is run as a command, with every setting at its
default (the queue is the embedded one by default) but the ones a deployment must give
(database URL, tokens), again and again until its report says ``remaining: 0`` (one sweep
stops at its time budget,
``REMINDERS_SWEEP_TIME_BUDGET_SECONDS``, 60 s by default). Nothing else touches the database
between the commands: no ANALYZE, no tuning.

Printed per run: the wall time of all the commands together and the rate, the commands'
count, the highest peak RSS of one command (``VmHWM``, sampled every 0.05 s until it
exits), and CPU per reminder in µs:
the commands' user time, their system (kernel) time, and the PostgreSQL backends serving
the benchmark's database (user + system, from ``/proc``, sampled every 0.1 s, so up to
0.1 s of a backend's last moments can be missed; PostgreSQL's shared background processes
are not counted). ``--baseline PATH`` runs each measurement a second time with the code of
another checkout (e.g. a ``git worktree`` of an older commit), alternating, on the same
schema. The run fails unless N messages wait in the queue and N reminders are ``enqueued``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.e2e import REQUIRED, BackendSampler, Database, database, verify_swept  # noqa: E402


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory so far (VmHWM), in MB; 0 once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run_sweep(
    env: dict[str, str], code: Path, log: Path
) -> tuple[dict[str, Any], Any, float, float]:
    """One ``reminders sweep`` of the checkout ``code``: its report, rusage, wall time and
    peak RSS (MB)."""
    command = [sys.executable, "-c", "from app.cli import main; main()", "sweep"]
    started = time.perf_counter()
    errors = log.with_suffix(".err")
    with log.open("wb") as out, errors.open("wb") as err:
        process = subprocess.Popen(
            command, env={**env, "PYTHONPATH": str(code)}, cwd=code, stdout=out, stderr=err
        )
        peak = 0.0
        while True:
            # VmHWM: the peak RSS since exec (ru_maxrss would count the fork of this process).
            peak = max(peak, peak_rss_mb(process.pid))
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)  # this command's rusage
            if pid:
                break
            time.sleep(0.05)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    if process.returncode:
        detail = errors.read_text()[-2000:]
        raise SystemExit(f"reminders sweep exited {process.returncode}: {text}{detail}")
    return json.loads(text), usage, wall, peak


def sweep_env(db: Database) -> dict[str, str]:
    """The environment of ``reminders sweep``: no REMINDERS_ variable but the required ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    return {**env, **REQUIRED, "REMINDERS_DATABASE_URL": db.url}


async def run_once(args: argparse.Namespace, kind: str, code: Path) -> dict[str, Any]:
    """Seed, then ``reminders sweep`` until nothing is left."""
    with tempfile.TemporaryDirectory(prefix="rr-bench-sweep-") as tmp:
        async with database(kind, args, Path(tmp)) as db:
            await db.seed(args.reminders)
            env = sweep_env(db)
            backends = BackendSampler(getattr(db, "db_name", None))
            sampling = asyncio.create_task(backends.run())
            await asyncio.sleep(0)
            wall = user = system = peak = 0.0
            commands = enqueued = 0
            try:
                while True:
                    report, usage, seconds, rss = await asyncio.to_thread(
                        run_sweep, env, code, Path(tmp) / "sweep.log"
                    )
                    wall += seconds
                    commands += 1
                    enqueued += report["enqueued"]
                    user += usage.ru_utime
                    system += usage.ru_stime
                    peak = max(peak, rss)
                    if report["remaining"] == 0 or report.get("error"):
                        break
            finally:
                await asyncio.sleep(0.3)  # the backends' last moments
                sampling.cancel()
            await verify_swept(db, args.reminders)
            database_cpu = backends.used()
            per = 1e6 / args.reminders
            return {
                "wall": wall,
                "rate": args.reminders / wall,
                "commands": commands,
                "rss": peak,
                "cpu": (
                    user * per,
                    system * per,
                    None if database_cpu is None else database_cpu * per,
                ),
            }


async def main() -> None:
    """Parse arguments, run every combination, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reminders", type=int, default=1_000_000)
    parser.add_argument("--db", default="postgresql", help="postgresql, sqlite; a list")
    parser.add_argument("--baseline", type=Path, help="another checkout to compare, side by side")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.set_defaults(db_prefix="rr_bench_sweep_")  # the fresh databases' names (e2e.database)
    args = parser.parse_args()
    codes = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(
        f"{args.reminders} due reminders; settings changed from their defaults: "
        f"{', '.join(sorted([*REQUIRED, 'REMINDERS_DATABASE_URL']))} (required), none other"
    )
    print(f"{'db':>10} {'code':>8} {'wall s':>8} {'reminders/s':>11} {'commands':>8} "
          f"{'peak RSS MB':>11}  CPU µs/reminder: sweep user, kernel, PostgreSQL")  # fmt: skip
    for kind in args.db.split(","):
        for _ in range(args.repeat):
            for label, code in codes:
                result = await run_once(args, kind, code)
                user, system, pg = result["cpu"]
                print(
                    f"{kind:>10} {label:>8} {result['wall']:>8.1f} {result['rate']:>11.0f} "
                    f"{result['commands']:>8} {result['rss']:>11.0f}  {user:.0f}, {system:.0f}, "
                    + ("-" if pg is None else f"{pg:.0f}"),
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
