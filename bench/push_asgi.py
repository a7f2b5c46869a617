"""CPU per push request through the application's ASGI callable, in process (no network).

``bench/push.py`` measures the route through uvicorn and wrk; on a shared machine its rates
and even its CPU columns move by tens of percent between repetitions. This isolates what a
push costs *our* application: each source tree (``--tree NAME=PATH``, default: this one) is
imported in its own process, served a fresh PostgreSQL database seeded as push.py seeds it,
sent each of ``--reminders`` signed deliveries once (new → sent), then the same messages
over and over (duplicates, which never reach the database) while the process's CPU time
is read. The bare route (``bench/bare_app.py``) is driven the same way. Trees alternate
``--repeat`` times; the medians are printed::

    .venv/bin/python bench/push_asgi.py --n 20000 --repeat 5 --tree before=/tmp/push-before

Log lines (the delivery line per request, at INFO as by default) go to /dev/null.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUEUE = "reminders"


async def _drive(app: Any, requests: list[tuple[bytes, bytes]], n: int, status: int) -> float:
    """CPU µs per request for ``n`` requests cycling through ``requests``."""
    sent: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            sent.append(message["status"])

    async def one(signature: bytes, body: bytes) -> None:
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return messages.pop() if messages else {"type": "http.disconnect"}

        await app(_scope(signature, body), receive, send)

    for signature, body in requests:  # first round: new deliveries (or warm-up)
        await one(signature, body)
    sent.clear()
    started = time.process_time()
    for i in range(n):
        await one(*requests[i % len(requests)])
    elapsed = time.process_time() - started
    if set(sent) != {status}:
        raise SystemExit(f"unexpected statuses: {sorted(set(sent))}")
    return elapsed / n * 1e6


def _scope(signature: bytes, body: bytes) -> dict[str, Any]:
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-infrai-signature", signature),
    ]
    path = f"/push/{QUEUE}"
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def _child(kind: str, lines: list[bytes], n: int) -> float:
    requests = [tuple(line.split(b"\t", 2)[1:]) for line in lines]  # path, signature, body
    if kind == "bare":
        from bare_app import create_app as bare  # type: ignore[import-not-found]

        return await _drive(bare(), requests, n, 204)  # type: ignore[arg-type]
    from app.main import create_app

    app = create_app()
    async with app.router.lifespan_context(app):
        return await _drive(app, requests, n, 200)  # type: ignore[arg-type]


def _measure(name: str, tree: Path, args: argparse.Namespace, work: Path, secret: bytes) -> float:
    from bench import push as bench

    database = f"rr_bench_asgi_{secrets.token_hex(4)}"
    url = bench.pg_url(args.pg_admin_url, database, driver="postgresql+asyncpg")
    asyncio.run(bench.create_database(args.pg_admin_url, database))
    try:
        bench.migrate(bench.Target(name, tree), url)
        asyncio.run(bench.seed(bench.pg_url(args.pg_admin_url, database), args.reminders))
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
        env |= {
            "PYTHONPATH": f"{tree}:{ROOT}",
            "REMINDERS_DATABASE_URL": url,
            "REMINDERS_PUSH_SECRETS": secret.decode(),
            "REMINDERS_CRON_TOKEN": secrets.token_hex(16),
            "REMINDERS_API_TOKEN": secrets.token_hex(16),
            "REMINDERS_ADMIN_TOKEN": secrets.token_hex(16),
            "REMINDERS_METRICS_TOKEN": secrets.token_hex(16),
            "REMINDERS_OUTBOX_DIR": str(work / f"outbox-{database}"),
            "REMINDERS_OUTBOX_FSYNC": "0",
            "REMINDERS_QUEUE": "memory",
        }
        profile = Path(args.profile_dir) / f"{name}.raw" if args.profile_dir else None
        return _run_child("service", work / "requests.txt", args.n, env, profile)
    finally:
        asyncio.run(bench.drop_database(args.pg_admin_url, database))


def _run_child(
    kind: str, requests: Path, n: int, env: dict[str, str], profile: Path | None = None
) -> float:
    # By file path: sys.path[0] is then bench/, not the working directory, so ``app`` is the
    # one of the tree on PYTHONPATH.
    code = [__file__, "--child", kind, str(requests), str(n)]
    py_spy = Path(sys.executable).parent / "py-spy"
    profiler = [str(py_spy), "record", "-r", "500", "--format", "raw", "-o", str(profile), "--"]
    profiler = profiler if profile else []
    done = subprocess.run(
        [*profiler, sys.executable, *code], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, check=False,
    )  # fmt: skip
    result = [line for line in done.stderr.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not result:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return float(result[-1].split()[1])


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=20000, help="timed duplicate requests per run")
    parser.add_argument("--reminders", type=int, default=200, help="distinct messages")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH of another tree")
    parser.add_argument("--profile-dir", help="py-spy records each service run here (raw)")
    parser.add_argument("--pg-admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    return parser.parse_args()


def _summary(label: str, results: dict[str, list[float]], pick: Any) -> str:
    return label + ", ".join(f"{name} {pick(values):.1f}" for name, values in results.items())


def main() -> int:
    """Measure the bare route and every tree ``--repeat`` times; print the medians."""
    from bench import push as bench

    args = parse_args()
    trees = [("service", ROOT)]
    trees += [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1])) for spec in args.tree]
    secret = secrets.token_hex(32).encode()
    results: dict[str, list[float]] = {name: [] for name in ["bare", *(t[0] for t in trees)]}
    with tempfile.TemporaryDirectory(prefix="rr-asgi-") as tmp:
        work = Path(tmp)
        bench.write_requests(work / "requests.txt", secret, range(args.reminders))
        env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
        bare_env = env | {"PYTHONPATH": str(ROOT)}
        for repetition in range(args.repeat):
            turn = repetition % len(trees)  # rotate: drift favours no tree
            results["bare"].append(_run_child("bare", work / "requests.txt", args.n, bare_env))
            for name, tree in trees[turn:] + trees[:turn]:
                results[name].append(_measure(name, tree, args, work, secret))
            print(_summary(f"repetition {repetition + 1}: ", results, lambda v: v[-1]), flush=True)
    print(_summary("CPU µs per request (median): ", results, statistics.median))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        kind, requests, n = sys.argv[2:5]
        lines = Path(requests).read_bytes().splitlines()
        print("RESULT", asyncio.run(_child(kind, lines, int(n))), file=sys.stderr)
        raise SystemExit(0)
    raise SystemExit(main())
