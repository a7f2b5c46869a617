"""How many worker processes ``reminders serve`` runs.

One ``serve`` process is one event loop on one core, and the work of a delivery is spread
over the receiver's Python and PostgreSQL's backends: on a 2-core machine one worker leaves
half the machine idle (measured in bench/README.md). So on PostgreSQL ``serve`` runs a
worker per core by default, like replicas of the same service (the ledger and the queue's
claims keep them apart). Each worker opens its own database pools
(``REMINDERS_DATABASE_POOL_SIZE`` + 1 connections), so the default stops at
``MAX_DEFAULT_WORKERS``; ``--workers N`` sets any count. SQLite has one writer: one worker.

The processes themselves (uvicorn's supervisor, a worker's first step): ``app.supervisor``.
"""

from __future__ import annotations

import os

MAX_DEFAULT_WORKERS = 4


def default_workers(*, is_sqlite: bool, cores: int) -> int:
    """The worker count ``serve`` runs when ``--workers`` is not given."""
    if is_sqlite:
        return 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS reports it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
