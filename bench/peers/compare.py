"""Our service next to a Celery + Redis peer: reminders per second from due to sent, one run.

Usage (from the repository root; PostgreSQL on 127.0.0.1:5432, Redis on 127.0.0.1:6379,
the peer's environment in ``.venv-peers``, see bench/README.md)::

    .venv/bin/python bench/peers/compare.py [--reminders 50000] [--repeat 1]
                                            [--peer POOL:CONCURRENCY:PREFETCH ...]
                                            [--peers-only]

Each repetition runs both sides in turn (the order flips every repetition, so a noisy,
shared machine weighs on each alike), each on its own fresh database (``rr_peer_*``, seeded
with the same N customers and N due ``renewal`` email reminders, dropped afterwards):

- **ours**: ``reminders serve`` on its defaults, as ``bench/e2e.py`` runs it (its
  ``run_in``): the clock runs from the first ``POST /cron/sweep`` to the last ``sent`` row;
- **peer** (``celery_peer``): a Celery worker (``--peer``: pool, concurrency, prefetch
  multiplier; several configurations run side by side) consuming a Redis queue, and the
  producer a team would run from cron, which publishes one task per due reminder; each task
  claims its ledger row (``INSERT ... ON CONFLICT DO NOTHING``), renders the service's
  template, writes the ``.eml`` the service's outbox writes (fsync, rename) and finalizes
  the row. The clock runs from the producer's start to the last ``sent`` row.

Both sides are verified: one ``sent`` ledger row and one outbox file per reminder (and, for
the peer, every task published once, none left in Redis); the two sides' emails for the
same reminder must be the same bytes but for ``Date``. Printed per run: reminders/s, wall
seconds, p50/p99 of each reminder's due → sent, CPU µs per reminder (ours: serve user,
kernel, PostgreSQL backends; peer: worker processes, producer, Redis, PostgreSQL backends)
with totals; then the median rates and ``ratio ours/peer = X.XX`` (against the fastest peer
configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.adapters.channels.outbox import file_stem  # noqa: E402
from bench.e2e import Run, run_in  # noqa: E402
from bench.peers.peer import PeerConfig, PeerRun, run_peer  # noqa: E402

# The fastest configuration found on the 2-core machine (bench/README.md lists the others).
DEFAULT_PEER = "threads:16:16"
SAMPLE = f"{file_stem('bench:0000000:email:outbox')}.eml"  # the first reminder's email


def moving_parts(configs: list[PeerConfig]) -> list[str]:
    """What a team runs, operates and monitors on each side."""
    lines = ["moving parts (services to run / application processes):",
             "  ours: 2 services: PostgreSQL, `reminders serve` (API, sweep and dispatcher "
             "in one process); 1 application process"]  # fmt: skip
    for config in configs:
        lines.append(
            f"  peer {config}: 4 services: PostgreSQL, Redis, the Celery worker, the producer "
            f"(cron or celery beat); {config.processes + 1} application processes "
            f"({config.processes} worker, 1 producer) plus redis-server"
        )
    return lines


def outbox_files(directory: Path) -> tuple[int, bytes]:
    """How many emails the outbox holds, and the first reminder's."""
    emails = directory / "email"
    count = sum(1 for entry in os.scandir(emails) if entry.name.endswith(".eml"))
    return count, (emails / SAMPLE).read_bytes()


async def run_ours(args: argparse.Namespace) -> dict[str, Any]:
    """bench/e2e.py's run of ``serve`` on defaults, on an ``rr_peer_`` database."""
    e2e_args = argparse.Namespace(
        reminders=args.reminders, overrides={}, pg_admin_url=args.pg_admin_url,
        db_prefix="rr_peer_",
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="rr-peer-ours-") as tmp:
        result = await run_in(
            e2e_args, Run("postgresql", "inprocess", None, ROOT, "ours"), Path(tmp)
        )
        files, result["sample"] = outbox_files(Path(tmp) / "outbox")
    if files != args.reminders:
        raise SystemExit(f"ours: {files} outbox files for {args.reminders} reminders")
    result["cpu_us"] = result["cpu_us"][:3]  # serve user, kernel, PostgreSQL
    return result


async def run_one_peer(args: argparse.Namespace, config: PeerConfig) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rr-peer-celery-") as tmp:
        run = PeerRun(config, args.reminders, Path(tmp), args.pg_admin_url, args.broker_url,
                      args.peer_python)  # fmt: skip
        result = await run_peer(run)
        result["sample"] = outbox_files(Path(tmp) / "outbox")[1]
    return result


def same_email(ours: bytes, peer: bytes) -> bool:
    """The same bytes but for the Date header (when each side wrote it)."""

    def undated(content: bytes) -> list[bytes]:
        return [line for line in content.splitlines() if not line.startswith(b"Date: ")]

    return undated(ours) == undated(peer)


def row(label: str, result: dict[str, Any]) -> str:
    cpu = result["cpu_us"]
    return (
        f"{label:>22} {result['rate']:>11.0f} {result['elapsed']:>8.2f} {result['p50']:>7.2f} "
        f"{result['p99']:>7.2f} {sum(cpu):>9.0f}  " + ", ".join(f"{us:.0f}" for us in cpu)
    )


async def main() -> None:
    # SIGTERM (timeout, kill) cancels the run, so workers stop and databases are dropped.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    args = parse_args()
    configs = [PeerConfig.parse(text) for text in args.peer or [DEFAULT_PEER]]
    print(f"{args.reminders} reminders, {args.repeat} repetition(s), alternating")
    print("\n".join(moving_parts(configs)), flush=True)
    print(f"{'side':>22} {'reminders/s':>11} {'total s':>8} {'p50 s':>7} {'p99 s':>7} "
          f"{'CPU µs':>9}  per reminder: ours = serve user, kernel, PostgreSQL; "
          f"peer = worker, producer, Redis, PostgreSQL")  # fmt: skip
    rates: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    sides: list[str | PeerConfig] = [*([] if args.peers_only else ["ours"]), *configs]
    for repetition in range(args.repeat):
        for side in sides if repetition % 2 == 0 else sides[::-1]:
            label = "ours" if side == "ours" else f"peer {side}"
            if isinstance(side, PeerConfig):
                result = await run_one_peer(args, side)
            else:
                result = await run_ours(args)
            print(row(label, result), flush=True)
            rates.setdefault(label, []).append(result["rate"])
            cpus.setdefault(label, []).append(sum(result["cpu_us"]))
            check_email(label, result["sample"])
    summarize(rates, cpus)


SAMPLES: dict[str, bytes] = {}


def check_email(label: str, sample: bytes) -> None:
    """Every side's email for the first reminder is the same as the first side's."""
    first = SAMPLES.setdefault("first", sample)
    if not same_email(first, sample):
        raise SystemExit(f"{label} wrote another email:\n{first.decode()}\n---\n{sample.decode()}")


def summarize(rates: dict[str, list[float]], cpus: dict[str, list[float]]) -> None:
    """Medians per side, then the ratio to the fastest peer configuration."""
    print("medians: " + "; ".join(
        f"{label} {statistics.median(r):.0f}/s, {statistics.median(cpus[label]):.0f} µs CPU"
        for label, r in rates.items()
    ))  # fmt: skip
    if "ours" not in rates:
        return  # --peers-only: nothing to compare with
    peers = {label: statistics.median(r) for label, r in rates.items() if label != "ours"}
    fastest = max(peers, key=peers.__getitem__)
    ours = statistics.median(rates["ours"])
    cpu_ratio = statistics.median(cpus[fastest]) / statistics.median(cpus["ours"])
    print(f"emails identical but for Date: yes; fastest peer: {fastest}; "
          f"CPU per reminder peer/ours = {cpu_ratio:.2f}")  # fmt: skip
    print(f"ratio ours/peer = {ours / peers[fastest]:.2f}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reminders", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--peer", action="append", metavar="POOL:CONCURRENCY:PREFETCH",
        help=f"a Celery worker configuration (repeatable; default {DEFAULT_PEER}); "
        "POOL: prefork, threads, gevent or solo",
    )  # fmt: skip
    parser.add_argument(
        "--peers-only", action="store_true", help="only the peer configurations (to tune them)"
    )
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--peer-python", type=Path, default=ROOT / ".venv-peers/bin/python")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main())
