"""The one line every process logs when it starts: what it runs on.

A misspelt variable once ran a deployment on an unexpected database without a word; this
line names the database (host and name, or the SQLite file; never the password), the
schema revision it found, the queue kind of each channel and the providers, so a look at
the first log line says which configuration a process took. Settings that only make sense
locally follow, one warning line each.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.readiness import DatabaseState, DatabaseStatus, database_location, inspect_database
from app.settings import DatabaseSettings, Settings

log = logging.getLogger("reminders.startup")


def describe_database(url: str) -> str:
    """``postgresql host:port/name`` or ``sqlite /absolute/path``: no user, no password."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        name = parsed.database or ":memory:"
        return f"sqlite {name if name == ':memory:' else Path(name).resolve()}"
    return f"{backend} {database_location(url)}/{parsed.database or ''}"


def describe_schema(state: DatabaseState) -> str:
    """The revision the database is at, and whether that is this version's head."""
    schema = ", ".join(state.schema) or "none"
    if state.status == DatabaseStatus.READY:
        return f"{schema} (head)"
    if state.status == DatabaseStatus.MIGRATIONS_PENDING:
        return f"{schema} (head is {', '.join(state.head)})"
    return f"unknown ({state.status})"


def startup_line(process: str, settings: DatabaseSettings, state: DatabaseState) -> str:
    """``<process> starting: database …, schema …; queues …; providers …``."""
    database = describe_database(settings.database_url)
    parts = [f"database {database}, schema {describe_schema(state)}"]
    if isinstance(settings, Settings):  # `migrate` reads only the database settings
        kinds, queues = settings.channel_queue_kinds, settings.channel_queues
        parts.append("queues " + " ".join(f"{c}={kinds[c]}/{queues[c]}" for c in sorted(kinds)))
        parts.append(
            f"providers email={settings.email_provider} webhook={settings.webhook_provider}"
        )
    mode = " in dev mode" if settings.dev_mode else ""
    return f"{process} starting{mode}: {'; '.join(parts)}"


async def announce(process: str, settings: Settings, engine: AsyncEngine) -> None:
    """Read the schema revision on ``engine`` (bounded by REMINDERS_READYZ_TIMEOUT_SECONDS)
    and log the startup line."""
    state = await inspect_database(engine, timeout=settings.readyz_timeout_seconds)
    log_startup(process, settings, state)


def log_startup(process: str, settings: DatabaseSettings, state: DatabaseState) -> None:
    """Log the startup line, then one warning per setting that only makes sense locally."""
    log.info(startup_line(process, settings, state))
    if isinstance(settings, Settings):
        for warning in settings.local_only_warnings():
            log.warning(warning)
