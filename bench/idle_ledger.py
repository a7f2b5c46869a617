"""What `reminders serve` costs PostgreSQL while idle on a large ledger.

Every worker reads the ledger in the background for ``/metrics`` and the admin page (the
gauges, and the audit, whose checks walk every send of the last 8 days). This seeds a
fresh PostgreSQL database with ``--sends`` reminders already sent (customers and
reminders by COPY, then their send records and attempts by SQL, as if sent in the last
minutes), starts ``reminders serve`` with every setting at its default, waits for its
workers, then samples the CPU of serve's processes and of the database's backends for
``--seconds``. ``--baseline PATH`` runs the same on another checkout, alternating.

    .venv/bin/python bench/idle_ledger.py --sends 1000000 --seconds 150 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.e2e import (
    ROOT,
    BackendSampler,
    PostgresDatabase,
    free_port,
    service_env,
    start_service,
    wait_for_workers,
    wait_healthy,
)
from bench.process_tree import cpu_since, tree_cpu

# Every seeded reminder, sent through the outbox a few minutes ago: done, one sent record,
# one attempt that called the provider and recorded "sent".
SENT_BY_SQL = """
WITH sent AS (
    UPDATE reminders SET state = 'done', delivery = 'sent', enqueued_at = now(),
                         done_at = now(), updated_at = now()
    RETURNING id
), records AS (
    INSERT INTO send_records (reminder_id, channel, provider, state, attempt_count,
                              attempt_budget_start, outcome, idempotency_key, first_attempt_at,
                              sent_at, redrive_count, created_at, updated_at)
    SELECT id, 'email', 'outbox', 'sent', 1, 0, 'sent', id || ':email:outbox', now(), now(), 0,
           now(), now()
    FROM sent
    RETURNING id, reminder_id
)
INSERT INTO send_attempts (send_record_id, reminder_id, channel, provider, attempt, claimed_by,
                           claimed_at, provider_deduplicates, provider_called, outcome,
                           finished_at)
SELECT id, reminder_id, 'email', 'outbox', 1, 'bench', now(), false, true, 'sent', now()
FROM records
"""


async def run_once(args: argparse.Namespace, label: str, code: Path) -> str:
    """Seed, serve idle for ``args.seconds``, and the row of the table."""
    with tempfile.TemporaryDirectory(prefix="rr-bench-idle-") as tmp:
        db = PostgresDatabase(args.pg_admin_url, prefix="rr_bench_idle_")
        await db.create(code)
        try:
            await db.seed(args.sends)
            assert db.conn is not None
            await db.conn.execute(SENT_BY_SQL)
            await db.conn.execute("ANALYZE")  # as autovacuum would have by now on a server
            port = free_port()
            env = service_env(db.url, Path(tmp) / "outbox", {})
            [serve] = start_service(env, port, Path(tmp) / "service.log", "inprocess", code)
            backends = BackendSampler(db.db_name, await db.own_backends())
            try:
                await wait_healthy(f"http://127.0.0.1:{port}", serve)
                await wait_for_workers(serve.pid, None)
                before = tree_cpu(serve.pid)
                sampling = asyncio.create_task(backends.run())
                await asyncio.sleep(args.seconds)
                user, kernel = cpu_since(before, tree_cpu(serve.pid))
                sampling.cancel()
            finally:
                serve.terminate()
                serve.wait(30)
        finally:
            await db.drop()
    database = backends.used() or 0.0
    share = 100 * database / args.seconds
    return (
        f"{label:>8} {args.sends:>9} {args.seconds:>5} s  serve {user:6.1f} + {kernel:5.1f} s"
        f"  PostgreSQL {database:6.1f} s ({share:4.1f}% of a core)"
    )


async def main() -> None:
    """Parse arguments, run each checkout ``--repeat`` times, alternating, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare, side by side")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    codes = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print("serve idle on a ledger of sent reminders, every setting at its default")
    for _ in range(args.repeat):
        for label, code in codes:
            print(await run_once(args, label, code), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
