"""Real processes for end-to-end tests: ``reminders serve`` / ``dispatch`` / ``demo``.

Each runs the installed console script with its configuration in the environment (the
test database's URL included), on loopback ports. Waiting is polling with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.push import PUSH_SECRET

REMINDERS = str(Path(sys.executable).parent / "reminders")
API_TOKEN, CRON_TOKEN = (
    "e2e-api-token-2f7b9d1c5e3a8064b2d9f1",
    "e2e-cron-token-6d0a4c8e2b9f7135a3c5e7",
)
API = {"Authorization": f"Bearer {API_TOKEN}"}
CRON = {"Authorization": f"Bearer {CRON_TOKEN}"}
WEBHOOK_SECRET = "whsec_ZTJlLXdlYmhvb2stc2lnbmluZy1zZWNyZXQ="


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def service_env(database_url: str, outbox: Path, **overrides: str) -> dict[str, str]:
    """A production-like configuration (no dev mode) for a test process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    env.update(
        REMINDERS_DATABASE_URL=database_url,
        REMINDERS_PUSH_SECRETS=PUSH_SECRET,
        REMINDERS_API_TOKEN=API_TOKEN,
        REMINDERS_CRON_TOKEN=CRON_TOKEN,
        REMINDERS_ADMIN_TOKEN="e2e-admin-token-a9e3c7f1d5b20486c1e3a5",
        REMINDERS_METRICS_TOKEN="test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        REMINDERS_OUTBOX_DIR=str(outbox),
        REMINDERS_OUTBOX_FSYNC="false",
        REMINDERS_WEBHOOK_PROVIDER="webhook",
        REMINDERS_WEBHOOK_SIGNING_SECRET=WEBHOOK_SECRET,
        REMINDERS_WEBHOOK_ALLOWED_TARGETS="127.0.0.1",
        REMINDERS_LEASE_SECONDS="10",
        REMINDERS_PROVIDER_TIMEOUT_SECONDS="5",
        REMINDERS_BACKOFF_BASE_SECONDS="1",
        REMINDERS_BACKOFF_CAP_SECONDS="2",
        REMINDERS_LOG_LEVEL="WARNING",
        REMINDERS_EMBEDDED_SWEEP_INTERVAL_SECONDS="0",
        REMINDERS_EMBEDDED_POLL_INTERVAL_SECONDS="0.1",
        REMINDERS_EMBEDDED_BACKOFF_BASE_SECONDS="1",
        REMINDERS_EMBEDDED_BACKOFF_CAP_SECONDS="2",
        REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS="20",
        REMINDERS_EMBEDDED_VISIBILITY_TIMEOUT_SECONDS="25",
    )
    env.update(overrides)
    return env


_WHOLE_GROUP = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT})


@dataclass
class Process:
    """One child process; stdout and stderr go to a log file read on failure."""

    args: list[str]
    env: dict[str, str]
    log: Path
    # ``serve``: its own session, so its workers can be signalled with it (``signal``)
    group: bool = False
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Process:
        """Start it (again)."""
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.log.parent, start_new_session=self.group,
            )  # fmt: skip
        return self

    def signal(self, signum: int) -> None:
        """Send a signal. SIGTERM goes to the process, as ``kill PID`` would (``serve``'s
        supervisor stops its workers); SIGKILL (a crash), SIGSTOP and SIGCONT (a frozen
        host) reach every process of it, workers too."""
        assert self.popen is not None
        if self.group and signum in _WHOLE_GROUP and self.popen.poll() is None:
            os.killpg(self.popen.pid, signum)
        else:
            self.popen.send_signal(signum)

    async def wait_exit(self, timeout: float) -> int:
        """The exit code, polling up to ``timeout`` seconds."""
        assert self.popen is not None
        deadline = time.monotonic() + timeout
        while self.popen.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.args[1]} did not exit:\n{self.output()}")
            await asyncio.sleep(0.05)
        return self.popen.returncode

    def stop(self) -> None:
        """Make sure it is gone, workers too (teardown)."""
        if self.popen is None:
            return
        if self.group:
            with contextlib.suppress(ProcessLookupError):  # the group is gone already
                os.killpg(self.popen.pid, signal.SIGKILL)
        elif self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def output(self) -> str:
        """The last lines it printed."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])


def serve(env: dict[str, str], port: int, log: Path) -> Process:
    """``reminders serve`` on a loopback port (not started)."""
    return Process([REMINDERS, "serve", "--port", str(port), "--no-migrate"], env, log, group=True)


def dispatch(env: dict[str, str], log: Path) -> Process:
    """``reminders dispatch`` (not started)."""
    return Process([REMINDERS, "dispatch"], env, log)


async def wait_until(
    condition: Callable[[], Awaitable[bool]],
    *,
    timeout: float,
    what: str,
    processes: tuple[Process, ...] = (),
) -> None:
    """Poll ``condition`` until it holds; on timeout fail with the processes' output."""
    deadline = time.monotonic() + timeout
    while not await condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {p.args[1]}:\n{p.output()}" for p in processes)
            raise AssertionError(f"timed out waiting for {what}\n{logs}")
        await asyncio.sleep(0.1)


async def wait_healthy(base_url: str, process: Process, timeout: float = 30) -> None:
    """Until ``/healthz`` answers 200."""

    async def healthy() -> bool:
        if process.popen is not None and process.popen.poll() is not None:
            raise AssertionError(f"the service exited:\n{process.output()}")
        try:
            async with httpx.AsyncClient(timeout=1) as client:
                return (await client.get(f"{base_url}/healthz")).status_code == 200
        except httpx.HTTPError:
            return False

    await wait_until(healthy, timeout=timeout, what="the service to be healthy")
