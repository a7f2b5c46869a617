"""Benchmark: reminders per second end to end through a pull queue (RabbitMQ, SQS on moto),
``reminders worker`` at its defaults.

Usage (from the repository root; PostgreSQL, RabbitMQ on 127.0.0.1; the ``aws`` and
``rabbitmq`` extras installed)::

    .venv/bin/python bench/pull_queues.py [--reminders 5000] [--kinds rabbitmq,sqs]
                                          [--repeat 1] [--timeout 900]

For each kind (alternating when repeated, so a noisy machine weighs on each alike):

1. a fresh PostgreSQL database seeded by COPY with N customers and N email reminders due now
   (as ``bench/e2e.py`` seeds it), and a fresh queue: a uniquely named RabbitMQ queue on the
   broker at ``--rabbitmq-url``, or an SQS queue on a moto server process started here;
2. ``reminders setup --queue KIND``, then the clock starts: ``reminders sweep`` (the same
   work as ``POST /cron/sweep``, run until it reports nothing remaining), then one
   ``reminders worker`` with every ``REMINDERS_WORKER_*`` setting at its default, sending
   through the outbox provider (files in a temporary directory, fsync off);
3. the ledger is polled until N rows are ``sent``; the clock stops.

The only settings changed from the defaults are the ones that name the queue, the
database, the outbox directory and its fsync, the log level (WARNING) and the secrets;
they are printed. Printed per run: reminders/s, and the CPU time per reminder of the
sweep process, the worker, PostgreSQL (the backends serving the run's database, sampled
every 0.1 s) and the broker (``beam.smp``, shared with anything else using it, or
``moto_server``), which a shared machine distorts less than the rate, and the worker's
highest resident memory. The run fails unless every reminder has
exactly one ``sent`` row and the outbox holds N files.
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
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.e2e import PostgresDatabase, cpu_seconds, free_port, rss_mb  # noqa: E402

REMINDERS = str(Path(sys.executable).with_name("reminders"))
MOTO = str(Path(sys.executable).with_name("moto_server"))
REGION = "us-east-1"
RABBITMQ_MAX_DELAY_DEFAULT = 3600  # REMINDERS_RABBITMQ_MAX_DELAY_SECONDS, not changed here
SECRETS = {
    "REMINDERS_PUSH_SECRETS": "bench-push-secret-5e9c3a7f1d8b2046a4c6e8",
    "REMINDERS_API_TOKEN": "bench-api-token-4c8e2a6f0d9b7135e1a3c5",
    "REMINDERS_CRON_TOKEN": "bench-cron-token-8a2e6c0f4b9d7153d3e5a7",
    "REMINDERS_ADMIN_TOKEN": "bench-admin-token-1f5b9d3a7e2c6084f2b4d6",
    "REMINDERS_METRICS_TOKEN": "bench-metrics-token-7d1b5f9a3c2e8046b4d6f8",
}


def total_cpu(command_name: str) -> float:
    """CPU seconds of every process named ``command_name``, with their reaped children."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if name == command_name:
            fields = rest.split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


class BackendSampler:
    """CPU of the PostgreSQL backends serving one database, sampled while a run lasts (a
    backend that exits between two samples loses at most one interval)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.last: dict[int, float] = {}

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(0.1)

    def sample(self) -> None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if f" {self.database} ".encode() not in (entry / "cmdline").read_bytes():
                    continue
                self.last[int(entry.name)] = cpu_seconds(int(entry.name))
            except OSError:
                continue

    def total(self) -> float:
        self.sample()
        return sum(self.last.values())


class Broker:
    """Where the queue lives for one run: its variables and its CPU so far."""

    kind: str
    process_name: str

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def cpu(self) -> float:
        return total_cpu(self.process_name)

    async def close(self) -> None:
        """Release what the run created."""


class RabbitBroker(Broker):
    kind, process_name = "rabbitmq", "beam.smp"

    def __init__(self, url: str) -> None:
        self.url = url
        self.queue = f"bench-{uuid.uuid4().hex[:10]}"

    def env(self) -> dict[str, str]:
        return {"REMINDERS_RABBITMQ_URL": self.url, "REMINDERS_QUEUE_NAME": self.queue}

    async def close(self) -> None:
        import aio_pika

        from app.adapters.queues.rabbitmq.topology import (
            buckets,
            dead_exchange,
            dead_queue,
            delay_queue,
        )

        connection = await aio_pika.connect(self.url)
        async with connection:
            channel = await connection.channel()
            delays = [delay_queue(self.queue, s) for s in buckets(RABBITMQ_MAX_DELAY_DEFAULT)]
            for name in (self.queue, dead_queue(self.queue), *delays):
                await channel.queue_delete(name)
            await channel.exchange_delete(dead_exchange(self.queue))


class MotoBroker(Broker):
    kind, process_name = "sqs", "moto_server"

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [MOTO, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.queue = f"bench-{uuid.uuid4().hex[:10]}"

    def env(self) -> dict[str, str]:
        return {
            "REMINDERS_SQS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "REMINDERS_SQS_REGION": REGION,
            "REMINDERS_QUEUE_NAME": self.queue,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    async def close(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def run_env(db: PostgresDatabase, broker: Broker, outbox: Path) -> tuple[dict, dict]:
    """The whole environment, and the settings this run changes from the defaults."""
    changed = {
        "REMINDERS_DATABASE_URL": db.url,
        "REMINDERS_QUEUE": broker.kind,
        "REMINDERS_OUTBOX_DIR": str(outbox),
        "REMINDERS_OUTBOX_FSYNC": "false",
        "REMINDERS_LOG_LEVEL": "WARNING",
        **{k: v for k, v in broker.env().items() if k.startswith("REMINDERS_")},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    env.update({**SECRETS, **broker.env(), **changed})
    return env, changed


async def run_command(args: list[str], env: dict, cwd: Path) -> tuple[str, float]:
    """Run a ``reminders`` command to its end; its output and its CPU seconds."""
    before = os.times()
    process = await asyncio.create_subprocess_exec(
        *args, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 1800)
    after = os.times()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(args[1:])} failed:\n{out.decode()}\n{err.decode()}")
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return out.decode(), cpu


async def run_once(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measured run of ``kind`` on a fresh database and queue."""
    db = PostgresDatabase(args.pg_admin_url)
    broker: Broker = RabbitBroker(args.rabbitmq_url) if kind == "rabbitmq" else MotoBroker()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            await db.create()
            await db.seed(args.reminders)
            env, changed = run_env(db, broker, work / "outbox")
            await run_command([REMINDERS, "setup", "--queue", kind], env, work)
            return await measure(db, broker, env, changed, work, args.reminders, args.timeout)
        finally:
            await broker.close()
            await db.drop()


async def measure(
    db: PostgresDatabase,
    broker: Broker,
    env: dict,
    changed: dict,
    work: Path,
    count: int,
    timeout: float,
) -> dict[str, Any]:
    backends = BackendSampler(db.db_name)
    sampling = asyncio.create_task(backends.run())
    broker_before = broker.cpu()
    started = time.perf_counter()
    sweep_cpu = 0.0
    while True:  # a sweep stops at its time budget: run it until nothing remains
        output, cpu = await run_command([REMINDERS, "sweep"], env, work)
        sweep_cpu += cpu
        if json.loads(output[output.index("{") :]).get("remaining", 0) == 0:
            break
    # The worker starts once the sweep is done: moto's SQS can drop a message sent while
    # another is deleted (it rebuilds its message list without a lock; real SQS does not).
    with (work / "worker.log").open("wb") as log:
        worker = await asyncio.create_subprocess_exec(
            REMINDERS, "worker", env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=log
        )
    try:
        peak_rss = 0.0
        while (
            sent := await db.scalar("SELECT count(*) FROM send_records WHERE state = 'sent'")
        ) < count:
            if worker.returncode is not None:
                raise SystemExit(f"the worker exited:\n{(work / 'worker.log').read_text()[-3000:]}")
            if time.perf_counter() - started > timeout:
                raise SystemExit(f"{sent} of {count} sent after {timeout:g} s")
            peak_rss = max(peak_rss, rss_mb(worker.pid))
            await asyncio.sleep(0.2)
        seconds = time.perf_counter() - started
        worker_cpu = cpu_seconds(worker.pid)
    finally:
        worker.terminate()
        await asyncio.wait_for(worker.wait(), 60)
        sampling.cancel()
    rows = await db.scalar("SELECT count(*) FROM send_records")
    files = len(list((work / "outbox").rglob("*.eml")))
    if rows != count or sent != count or files != count:
        raise SystemExit(
            f"expected {count} sends once each: {rows} rows, {sent} sent, {files} files"
        )
    per = 1e6 / count
    return {
        "kind": broker.kind,
        "reminders": count,
        "seconds": round(seconds, 2),
        "per_second": round(count / seconds, 1),
        "cpu_us_per_reminder": {
            "sweep": round(sweep_cpu * per),
            "worker": round(worker_cpu * per),
            "postgresql": round(backends.total() * per),
            broker.process_name: round((broker.cpu() - broker_before) * per),
        },
        "worker_peak_rss_mb": round(peak_rss, 1),
        "settings_changed": sorted(changed),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reminders", type=int, default=5000)
    parser.add_argument("--kinds", default="rabbitmq,sqs")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--rabbitmq-url", default="amqp://guest:guest@127.0.0.1:5672/")
    args = parser.parse_args()
    for _ in range(args.repeat):
        for kind in args.kinds.split(","):
            print(json.dumps(await run_once(kind, args)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
