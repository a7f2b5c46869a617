"""One run of the Celery peer (``celery_peer``): a fresh database seeded like bench/e2e.py's,
a Celery worker in the peer's own environment (``.venv-peers``), the producer, and the
ledger polled until every reminder is ``sent``. Used by ``compare.py``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.e2e import BackendSampler, PostgresDatabase, cpu_seconds, sent_at

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = Path(__file__).with_name("celery_peer") / "schema.sql"
APP = "bench.peers.celery_peer.app"


@dataclass(frozen=True)
class PeerConfig:
    """A worker pool, its concurrency and the prefetch multiplier: ``prefork:4:16``."""

    pool: str
    concurrency: int
    prefetch: int

    @classmethod
    def parse(cls, text: str) -> PeerConfig:
        pool, concurrency, prefetch = text.split(":")
        if pool not in ("prefork", "threads", "gevent", "solo"):
            raise ValueError(f"unknown pool {pool!r}")
        return cls(pool, int(concurrency), int(prefetch))

    def __str__(self) -> str:
        return f"{self.pool}:{self.concurrency}:{self.prefetch}"

    @property
    def processes(self) -> int:
        """The worker's processes: the main one and, with prefork, one per slot."""
        return 1 + (self.concurrency if self.pool == "prefork" else 0)

    @property
    def db_pool(self) -> int:
        """Connections per worker process: one per slot sharing the process."""
        return 1 if self.pool in ("prefork", "solo") else self.concurrency


def process_tree(root: int) -> list[int]:
    """``root`` and every process descending from it (Linux /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


def tree_cpu(root: int) -> float:
    """User + system CPU seconds of a process and its descendants, alive now."""
    total = 0.0
    for pid in process_tree(root):
        with contextlib.suppress(OSError):  # exited meanwhile
            total += cpu_seconds(pid)
    return total


def alive(pid: int) -> bool:
    """True while the process runs (a zombie counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def redis_cli(broker_url: str, *command: str) -> str:
    """One redis-cli command against the broker's database."""
    return subprocess.run(
        ["redis-cli", "-u", broker_url, *command], capture_output=True, text=True, check=True
    ).stdout.strip()


def redis_pid(broker_url: str) -> int:
    """The Redis server's process id (its CPU is part of the peer's cost)."""
    info = redis_cli(broker_url, "info", "server")
    return int(next(line for line in info.splitlines() if line.startswith("process_id:"))[11:])


@dataclass
class PeerRun:
    """Everything one run needs: where, how many, which configuration."""

    config: PeerConfig
    reminders: int
    tmp: Path
    admin_url: str
    broker_url: str
    python: Path

    def env(self, db: PostgresDatabase, queue: str) -> dict[str, str]:
        return {
            **os.environ,
            "PEER_BROKER_URL": self.broker_url,
            "PEER_QUEUE": queue,
            "PEER_PREFETCH": str(self.config.prefetch),
            "PEER_DATABASE_URL": db.raw_url,
            "PEER_DB_POOL": str(self.config.db_pool),
            "PEER_OUTBOX_DIR": str(self.tmp / "outbox"),
            "PEER_READY_FILE": str(self.tmp / "worker.ready"),
        }

    def start_worker(self, env: dict[str, str], queue: str) -> subprocess.Popen:
        """The Celery worker, quiet (WARNING: INFO logs two lines per task), without the
        cluster chatter a single worker does not need; its own session, to stop it whole."""
        command = [str(self.python), "-m", "celery", "-A", APP, "worker", "-Q", queue]
        command += ["--pool", self.config.pool, "--concurrency", str(self.config.concurrency)]
        command += ["--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
        command += ["--without-heartbeat", "-n", f"{queue}@%h"]
        with (self.tmp / "worker.log").open("wb") as log:
            return subprocess.Popen(
                command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    async def wait_ready(self, worker: subprocess.Popen, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not (self.tmp / "worker.ready").exists():
            if worker.poll() is not None or time.monotonic() > deadline:
                log = (self.tmp / "worker.log").read_text()[-2000:]
                raise SystemExit(f"the Celery worker did not start:\n{log}")
            await asyncio.sleep(0.05)


def stop_worker(worker: subprocess.Popen) -> None:
    """Warm shutdown (SIGTERM to the main process); its whole session if that hangs."""
    if worker.poll() is None:
        worker.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)  # any pool child left behind
    worker.wait()


def start_producer(python: Path, env: dict[str, str]) -> subprocess.Popen:
    """The producer, as cron starts it; its stderr says how many tasks it published."""
    return subprocess.Popen(
        [str(python), "-m", "bench.peers.celery_peer.producer"],
        env=env, cwd=ROOT, stderr=subprocess.PIPE,
    )  # fmt: skip


async def run_producer(python: Path, env: dict[str, str]) -> tuple[int, float]:
    """The producer to its end: tasks published and its CPU seconds (from wait4)."""
    producer = start_producer(python, env)
    assert producer.stderr is not None
    err = await asyncio.to_thread(producer.stderr.read)
    _, status, usage = await asyncio.to_thread(os.wait4, producer.pid, 0)
    producer.returncode = os.waitstatus_to_exitcode(status)
    if producer.returncode != 0 or not err.startswith(b"published "):
        raise SystemExit(f"the producer failed ({producer.returncode}): {err.decode()[-2000:]}")
    return int(err.split()[1]), usage.ru_utime + usage.ru_stime


async def run_peer(run: PeerRun) -> dict[str, Any]:
    """One measured run: fresh database and queue, removed afterwards."""
    db = PostgresDatabase(run.admin_url, prefix="rr_peer_")
    queue = f"rr-peer-{uuid.uuid4().hex[:8]}"
    (run.tmp / "outbox" / "email").mkdir(parents=True)
    try:
        await db.create()
        await db.seed(run.reminders)
        assert db.conn is not None
        await db.conn.execute(SCHEMA.read_text())
        env = run.env(db, queue)
        worker = run.start_worker(env, queue)
        try:
            await run.wait_ready(worker)
            result = await measure(run, db, env, worker.pid, queue)
        finally:
            stop_worker(worker)
        await verify(run, db, queue, result["published"])
        return result
    finally:
        # Kombu leaves the queue's binding keys; the queue itself is empty (verified).
        bindings = (f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        redis_cli(run.broker_url, "del", queue, *bindings)
        await db.drop()


async def drained(broker_url: str, queue: str, timeout: float = 30) -> None:
    """Until Redis holds no message of the run: the last tasks acknowledge after their
    ``sent`` row (acks_late), and a worker stopped before that would put them back."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = int(redis_cli(broker_url, "llen", queue) or 0)
        if not waiting and not int(redis_cli(broker_url, "hlen", "unacked") or 0):
            return
        await asyncio.sleep(0.1)


async def measure(
    run: PeerRun, db: PostgresDatabase, env: dict, worker: int, queue: str
) -> dict[str, Any]:
    """From the producer's start to the last ``sent`` ledger row, as bench/e2e.py measures
    ours from the first sweep; CPU of the worker, producer, Redis and PostgreSQL backends."""
    redis = redis_pid(run.broker_url)
    backends = BackendSampler(db.db_name)
    sampling = asyncio.create_task(backends.run())
    await asyncio.sleep(0)  # the backends' first sample
    worker_before, redis_before = tree_cpu(worker), cpu_seconds(redis)
    started_db, started = await db.now(), time.perf_counter()
    producing = asyncio.create_task(run_producer(run.python, env))
    poll = 0.02 if run.reminders <= 20_000 else 1.0  # as bench/e2e.py polls
    deadline = started + max(600, run.reminders / 25)  # 25/s: a loaded, shared machine
    sent = "SELECT count(*) FROM peer_ledger WHERE state = 'sent'"
    while await db.scalar(sent) < run.reminders:
        if producing.done() and producing.exception():
            await producing  # the producer's failure, as it was
        if time.perf_counter() > deadline or not alive(worker):
            producing.cancel()
            log = (run.tmp / "worker.log").read_text()[-2000:]
            raise SystemExit(f"the peer did not send every reminder in time:\n{log}")
        await asyncio.sleep(poll)
    elapsed = time.perf_counter() - started
    published, producer_cpu = await producing
    await drained(run.broker_url, queue)
    worker_cpu, redis_cpu = tree_cpu(worker) - worker_before, cpu_seconds(redis) - redis_before
    await asyncio.sleep(0.2)  # the backends' last moments
    sampling.cancel()
    seconds = sorted(
        (sent_at(v) - started_db).total_seconds()
        for v in await db.column("SELECT sent_at FROM peer_ledger")
    )
    per = 1e6 / run.reminders
    database_cpu = backends.used() or 0.0
    return {
        "rate": run.reminders / elapsed,
        "elapsed": elapsed,
        "p50": statistics.median(seconds),
        "p99": seconds[min(len(seconds) - 1, int(0.99 * len(seconds)))],
        "published": published,
        "cpu_us": [c * per for c in (worker_cpu, producer_cpu, redis_cpu, database_cpu)],
    }


async def verify(run: PeerRun, db: PostgresDatabase, queue: str, published: int) -> None:
    """Exactly once: one ``sent`` ledger row and one outbox file per reminder, every task
    published once and none left in Redis (waiting or unacknowledged)."""
    rows = await db.scalar("SELECT count(*) FROM peer_ledger")
    sent = await db.scalar("SELECT count(DISTINCT reminder_id) FROM peer_ledger WHERE state='sent'")
    files = sum(1 for e in os.scandir(run.tmp / "outbox" / "email") if e.name.endswith(".eml"))
    waiting = int(redis_cli(run.broker_url, "llen", queue) or 0)
    unacked = int(redis_cli(run.broker_url, "hlen", "unacked") or 0)
    counts = (rows, sent, files, published)
    if counts != (run.reminders,) * 4 or waiting or unacked:
        raise SystemExit(
            f"peer verification failed: {rows} ledger rows, {sent} sent, {files} files, "
            f"{published} published, {waiting} waiting, {unacked} unacknowledged in Redis\n"
            + (run.tmp / "worker.log").read_text()[-2000:]
        )
