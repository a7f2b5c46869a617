"""A PostgreSQL cluster of a test's own (``initdb`` on a free port in a temporary
directory), so a drill may restart or stop it; the shared server on 5432 is never touched.

The server binaries come from the machine's PostgreSQL (``/usr/lib/postgresql/*/bin``);
as root, the cluster runs as the ``postgres`` user, as PostgreSQL requires.
"""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.support.channel_servers import free_port


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return os.path.dirname(found[-1]) if found else None


@dataclass
class OwnPostgres:
    """A running cluster: its data directory, port and the commands to run on it."""

    bin_dir: str
    data: str
    port: int

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of its ``postgres`` database."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _command(self, *args: str) -> list[str]:
        command = [os.path.join(self.bin_dir, args[0]), *args[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            return ["runuser", "-u", "postgres", "--", *command]
        return command

    def pg_ctl(self, *args: str) -> None:
        """``pg_ctl`` on this cluster (waits for the action to complete)."""
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            self._command("pg_ctl", "-D", self.data, "-w", "-o", options, "-l",
                          os.path.join(self.data, "log"), *args),
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip

    async def apg_ctl(self, *args: str) -> None:
        """``pg_ctl`` without blocking the event loop."""
        await asyncio.to_thread(self.pg_ctl, *args)


@contextmanager
def own_postgres() -> Iterator[OwnPostgres]:
    """initdb, start, yield, stop and remove; skipped where no server binaries exist,
    failed instead under ``REMINDERS_CI`` (a drill must never pass CI by not running)."""
    import pytest

    bin_dir = _bin_dir()
    if bin_dir is None:
        reason = "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql"
        if os.environ.get("REMINDERS_CI"):
            pytest.fail(f"REMINDERS_CI is set but {reason}: .ci/run needs them for the drills")
        pytest.skip(reason)
    data = tempfile.mkdtemp(prefix="rr-pg-")
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
    cluster = OwnPostgres(bin_dir, data, free_port())
    subprocess.run(
        cluster._command("initdb", "-D", data, "-A", "trust", "-U", "postgres"),
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    cluster.pg_ctl("start")
    try:
        yield cluster
    finally:
        try:
            cluster.pg_ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(data, ignore_errors=True)
