"""``reminders serve``'s processes: uvicorn's run, its supervisor and a worker's first step.

``serve`` checks the settings and the database in its own process first (one-line errors,
before anything binds). Those checks import the whole service and build it once: about
100 MB resident. With several workers uvicorn spawns each worker as a fresh interpreter
that imports the service again, so a supervisor that kept the checks' memory would hold
it for nothing. So ``serve`` then replaces itself (``exec``: the same process id, so a
process manager's signals still reach the supervisor) with ``python -m app.supervisor``,
which imports uvicorn and the log setup, not the service. One worker runs in ``serve``'s
own process, which needs the service anyway.

A worker must not outlive its supervisor: were the supervisor killed (``kill -9``, the OOM
killer), orphaned workers would keep the port and keep delivering, and the next ``serve``
could not start. So each worker asks the kernel for SIGTERM when its supervisor dies
(Linux), which shuts it down as a stop would: in-flight deliveries finish, nothing new
starts.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import signal
import sys
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

# Set by ``serve`` for its workers: the supervisor's process id.
SUPERVISOR_PID = "_REMINDERS_SERVE_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True, slots=True)
class ServeRun:
    """What uvicorn is asked to run (``serve``'s options and the settings it needs)."""

    host: str
    port: int
    workers: int
    healthcheck_seconds: int
    log_level: str
    log_format: str

    def argv(self) -> list[str]:
        """The options of ``python -m app.supervisor`` that rebuild this run."""
        return [f"--{name}={getattr(self, name)}" for name in _FIELD_TYPES]

    @classmethod
    def from_argv(cls, argv: list[str]) -> ServeRun:
        parser = argparse.ArgumentParser(prog="python -m app.supervisor")
        for name, kind in _FIELD_TYPES.items():
            parser.add_argument(f"--{name}", type=kind, required=True)
        return cls(**vars(parser.parse_args(argv)))


# Each field of ``ServeRun`` as a command-line option: its name and how it is parsed.
_FIELD_TYPES = {field.name: {"str": str, "int": int}[str(field.type)] for field in fields(ServeRun)}


def serve_with(run: ServeRun) -> None:
    """Run uvicorn: in this process for one worker, else as a lean supervisor (exec)."""
    if run.workers > 1:
        from app.db.migrations import hand_revisions_to_children
        from app.services.sent_keys import share_with_workers

        os.environ[SUPERVISOR_PID] = str(os.getpid())  # exec keeps the id: workers know it
        hand_revisions_to_children()  # the workers then compare schemas without Alembic
        share_with_workers()  # a duplicate is answered from memory by whichever worker
    if run.workers > 1 and hasattr(os, "execv"):
        sys.stdout.flush()
        sys.stderr.flush()
        # -P: not the current directory first on the path, where a user's own ``app``
        # package would shadow ours.
        python = [sys.executable, "-P", "-m", "app.supervisor"]
        os.execv(sys.executable, [*python, *run.argv()])
    else:  # one worker; or no exec here, and the supervisor keeps the checks' memory
        run_uvicorn(run)


def run_uvicorn(run: ServeRun) -> None:
    import uvicorn

    from app.observability.logs import configure_logging

    configure_logging(run.log_level, log_format=run.log_format)  # uvicorn's too
    uvicorn.run(
        "app.supervisor:create_worker_app",
        factory=True,
        host=run.host,
        port=run.port,
        workers=run.workers,
        timeout_worker_healthcheck=run.healthcheck_seconds,
        log_config=None,  # keep the JSON logging configured above
        **server_options(),
    )


def server_options() -> dict[str, Any]:
    """How uvicorn serves (bench/bare_app.py serves its bare route the same way)."""
    if importlib.util.find_spec("httptools"):  # uvicorn's fast parser, each answer in one send
        from app.http_protocol import JoinedWritesProtocol

        http: type | str = JoinedWritesProtocol
    else:
        http = "h11"
    return {
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": http,
        "proxy_headers": True,
        "forwarded_allow_ips": os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1"),
        "access_log": False,
    }


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


if __name__ == "__main__":
    run_uvicorn(ServeRun.from_argv(sys.argv[1:]))
