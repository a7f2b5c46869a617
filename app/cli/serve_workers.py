"""How many processes ``reminders serve`` runs, and what each of them does first.

One ``serve`` process is one event loop on one core, and the work of a delivery is spread
over the receiver's Python and PostgreSQL's backends: on a 2-core machine one worker leaves
half the machine idle (measured in bench/README.md). So on PostgreSQL ``serve`` runs a
worker per core by default, like replicas of the same service (the ledger and the queue's
claims keep them apart). Each worker opens its own database pools
(``REMINDERS_DATABASE_POOL_SIZE`` + 1 connections), so the default stops at
``MAX_DEFAULT_WORKERS``; ``--workers N`` sets any count. SQLite has one writer: one worker.

Several workers run under uvicorn's supervisor. A worker must not outlive it: were the
supervisor killed (``kill -9``, the OOM killer), orphaned workers would keep the port and
keep delivering, and the next ``serve`` could not start. So each worker asks the kernel for
SIGTERM when its supervisor dies (Linux), which shuts it down as a stop would: in-flight
deliveries finish, nothing new starts.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from fastapi import FastAPI

MAX_DEFAULT_WORKERS = 4
# Set by ``serve`` for its workers: the supervisor's process id.
SUPERVISOR_PID = "_REMINDERS_SERVE_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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


def create_worker_app() -> FastAPI:
    """The application of one ``serve`` worker (uvicorn's factory)."""
    from app.main import create_app

    die_with_supervisor()
    return create_app()


def die_with_supervisor() -> None:
    """Under a supervisor (``SUPERVISOR_PID``): be sent SIGTERM when it dies (Linux)."""
    supervisor = os.environ.get(SUPERVISOR_PID)
    if not supervisor or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        return  # refused: the worker runs as before, without the guard
    if os.getppid() != int(supervisor):  # it died before the request: nobody would tell us
        os._exit(0)
