"""What ``reminders serve`` checks before anything starts, and what it says in dev mode.

In this order, each refusal one line on stderr and exit 1: dev mode listens on loopback only
(its tokens are published), the port is free (before any
background work: a second instance must not sweep or dispatch on its way to failing), then
the database is reachable, exists and is at the migrations' head — waiting up to
``REMINDERS_DATABASE_WAIT_SECONDS`` for it when a container starts beside its database —,
and the service's objects build from the settings.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Callable

from rich.console import Console

from app.cli.common import checked_container, fail
from app.cli.embedded import local_base_url
from app.db.engine import create_engine
from app.db.readiness import DatabaseState, explain_failure, inspect_database
from app.settings import SECRET_FIELDS, Settings
from app.settings.local_only import is_loopback_name
from app.settings.secrets import DEV_PUSH_SECRET, dev_token

# How long one look at the database may take, and the pause between looks while waiting.
_PROBE_SECONDS = 5.0
_FIRST_PAUSE, _MAX_PAUSE = 0.5, 5.0
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def refuse_dev_mode_off_loopback(settings: Settings, host: str) -> None:
    """Exit 1 when dev mode (well-known tokens) would listen beyond this machine."""
    if settings.dev_mode and not is_loopback(host):
        fail(
            f"REMINDERS_DEV_MODE=1 listens on loopback only (its tokens are published), not on "
            f"--host {host}: use --host 127.0.0.1, or set real secrets without dev mode"
        )


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; wildcards (0.0.0.0, ::) are not."""
    if is_loopback_name(host):
        return True
    try:
        ipaddress.ip_address(host)
        return False  # an address, and not a loopback one
    except ValueError:  # a name: loopback only if every address it has is
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def refuse_if_port_taken(host: str, port: int) -> None:
    """Exit 1 when ``host:port`` cannot be bound (another server holds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as error:
            fail(
                f"cannot listen on {host}:{port} ({error.strerror or error}): another process "
                "holds it (another `reminders serve`?); stop it or choose another --port"
            )


def refuse_unless_database_ready(settings: Settings) -> None:
    """Exit 1 with the reason (and its fix) unless the database is ready, after waiting up
    to ``REMINDERS_DATABASE_WAIT_SECONDS``."""
    state = asyncio.run(
        wait_for_database(
            settings.database_url,
            wait_seconds=settings.database_wait_seconds,
            on_wait=lambda state: _stderr.print(
                f"reminders: waiting for the database: {state.reason}", markup=False
            ),
        )
    )
    if not state.ready:
        fail(state.reason)


def look_at_database(url: str) -> DatabaseState:
    """One look at the database (reachable, exists, migrated?), bounded in time."""
    return asyncio.run(_look(url))


async def wait_for_database(
    url: str,
    *,
    wait_seconds: float,
    on_wait: Callable[[DatabaseState], object],
    monotonic: Callable[[], float] = time.monotonic,
) -> DatabaseState:
    """Look at the database until it is ready or ``wait_seconds`` have passed."""
    deadline = monotonic() + wait_seconds
    pause = _FIRST_PAUSE
    while True:
        state = await _look(url)
        if state.ready or monotonic() + pause > deadline:
            return state
        on_wait(state)
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE)


async def _look(url: str) -> DatabaseState:
    engine = create_engine(url, pool_size=1)
    try:
        return await inspect_database(engine, timeout=_PROBE_SECONDS)
    finally:
        await engine.dispose()


def refuse_unless_container_builds(settings: Settings) -> None:
    """Exit 1 in one line when the service's objects cannot be built from these settings
    (in uvicorn's lifespan the same error would be a traceback)."""

    async def build() -> None:
        async with checked_container(settings):
            pass

    asyncio.run(build())


def migrate_or_exit(database_url: str, migrate: Callable[[str], None]) -> None:
    """Run the migrations; a database that cannot be reached is one line, not a traceback."""
    try:
        migrate(database_url)
    except Exception as error:  # any failure of a migration run is reported and refused
        fail(explain_failure(error, database_url).reason)


def print_dev_banner(console: Console, settings: Settings, host: str, port: int) -> None:
    """Dev mode: where to click, and the well-known tokens it filled in (never others)."""
    base = local_base_url(host, port)
    lines = [
        f"reminder-relay in dev mode on {base} (well-known secrets: not for production)",
        f"  API docs      {base}/docs",
        f"  admin page    {base}/admin",
    ]
    for name in SECRET_FIELDS:
        if getattr(settings, name).get_secret_value() == dev_token(name):
            lines.append(f"  {name.replace('_', ' '):<13} {dev_token(name)}")
    if [secret.get_secret_value() for secret in settings.push_secrets] == [DEV_PUSH_SECRET]:
        lines.append(f"  {'push secret':<13} {DEV_PUSH_SECRET}")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
