"""Long runs of the deterministic simulation (tests/simulation/): many seeds, one summary.

    python bench/simulate.py --seeds 2000 [--first 0] [--steps 60] [--workers N]
                             [--database-url URL]

Without ``--database-url`` the seeds are spread over ``--workers`` processes (default: one
per core), each on a fresh SQLite file of its own. With it, they run one after another in
this process on that (empty, migratable) database. A failing seed is printed with its
violations; rerun it alone with ``--first SEED --seeds 1`` to replay it exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db.migrations import upgrade_to_head
from tests.simulation.run import run_seeds_here, run_seeds_in_processes


def main() -> None:
    """Parse the arguments, run, print the summary; exit 1 when a seed failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="simulate-"))
    seeds = range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    if args.database_url:
        upgrade_to_head(args.database_url)
        summary = run_seeds_here(args.database_url, workdir, seeds, args.steps)
    else:
        summary = run_seeds_in_processes(workdir, seeds, args.steps, args.workers)
    for failure in summary.failures:
        print(json.dumps(failure))
    totals = dataclasses.asdict(summary) | {"failures": len(summary.failures)}
    totals["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({"totals": totals, "failed_seeds": [f["seed"] for f in summary.failures]}))
    sys.exit(1 if summary.failures else 0)


if __name__ == "__main__":
    main()
