"""Long runs of the deterministic simulation (tests/simulation/): many seeds, one summary.

    python bench/simulate.py --seeds 2000 [--first 0] [--steps 120] [--database-url URL]

Without ``--database-url`` a fresh SQLite file is used. A failing seed is printed with its
violations; rerun it alone with ``--first SEED --seeds 1`` to replay it exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.db.migrations import upgrade_to_head
from tests.simulation.run import simulation_bed


async def run(first: int, seeds: int, steps: int, url: str, workdir: Path) -> dict:
    """Run the seeds; the summary (and every failure) as a dict."""
    totals = {"seeds": 0, "clean": 0, "deliveries": 0, "crashes": 0, "drops": 0,
              "unknown_outcome_window": 0, "queue_gave_up": 0}  # fmt: skip
    failures = []
    started = time.perf_counter()
    async with simulation_bed(url, workdir) as bed:
        for seed in range(first, first + seeds):
            result = await bed.run_seed(seed, steps=steps)
            totals["seeds"] += 1
            totals["clean"] += result.ok
            totals["deliveries"] += result.deliveries
            totals["crashes"] += result.crashes
            totals["drops"] += result.drops
            totals["unknown_outcome_window"] += result.unknown_window
            totals["queue_gave_up"] += result.dead_in_queue
            if not result.ok:
                failures.append({"seed": seed, "sent_twice": result.sent_twice,
                                 "audit": result.audit.to_json()})  # fmt: skip
                print(json.dumps(failures[-1]), flush=True)
    totals["seconds"] = round(time.perf_counter() - started, 1)
    return {"totals": totals, "failed_seeds": [f["seed"] for f in failures]}


def main() -> None:
    """Parse the arguments, run, print the summary; exit 1 when a seed failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="simulate-"))
    url = args.database_url or f"sqlite+aiosqlite:///{workdir}/simulation.db"
    upgrade_to_head(url)
    summary = asyncio.run(run(args.first, args.seeds, args.steps, url, workdir))
    print(json.dumps(summary))
    sys.exit(1 if summary["failed_seeds"] else 0)


if __name__ == "__main__":
    main()
