"""Is the database usable — reachable, existing, at the migrations' head? One reason, with
its fix, for ``reminders serve`` (which refuses to start otherwise) and ``/readyz``.

The reason is one line a person can act on: the host and port that refused, the database
to create, the command to run. It never contains the password of the URL.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from .migrations import applied_revisions, head_revisions, known_revisions


class DatabaseStatus(StrEnum):
    """What a look at the database found."""

    READY = "ready"  # reachable and at the migrations' head
    UNAVAILABLE = "unavailable"  # cannot connect, or refused us
    MISSING = "missing"  # the server answers, the database (or SQLite file) does not exist
    MIGRATIONS_PENDING = "migrations_pending"  # exists, schema behind (or ahead of) the code


@dataclass(frozen=True, slots=True)
class DatabaseState:
    """The status, and for anything but ready, the cause and the fix in one line."""

    status: DatabaseStatus
    reason: str = ""
    schema: tuple[str, ...] = ()
    head: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        """True when the service can run on this database."""
        return self.status == DatabaseStatus.READY


async def inspect_database(engine: AsyncEngine, *, timeout: float) -> DatabaseState:
    """Connect (bounded by ``timeout``), read the schema revision, compare with the head."""
    url = engine.url.render_as_string(hide_password=True)
    missing_file = missing_sqlite_file(url)
    if missing_file is not None:
        return DatabaseState(
            DatabaseStatus.MISSING,
            f"the SQLite database {missing_file} does not exist: run `reminders migrate` "
            "(it creates the file and the schema)",
        )
    try:
        async with asyncio.timeout(timeout), engine.connect() as conn:
            current = await applied_revisions(conn)
    except TimeoutError:
        return DatabaseState(
            DatabaseStatus.UNAVAILABLE,
            f"the database at {database_location(url)} did not answer within {timeout:g} s: "
            "check the host and port in REMINDERS_DATABASE_URL and that the server is running",
        )
    except Exception as error:  # every failure becomes a reason; none is "ready"
        return explain_failure(error, url)
    return _compare(frozenset(current))


def _compare(current: frozenset[str]) -> DatabaseState:
    expected = head_revisions()
    schema, head = tuple(sorted(current)), tuple(sorted(expected))
    if current == expected:
        return DatabaseState(DatabaseStatus.READY, schema=schema, head=head)
    if current and not current <= known_revisions():
        reason = (
            f"the database schema is at {', '.join(schema)}, newer than this version of the "
            f"service ({', '.join(head)}): deploy the version that migrated it"
        )
    elif not current:
        reason = "the database has no schema yet: run `reminders migrate`"
    else:
        reason = (
            f"the database schema is at {', '.join(schema)}, behind this version "
            f"({', '.join(head)}): run `reminders migrate`"
        )
    return DatabaseState(DatabaseStatus.MIGRATIONS_PENDING, reason, schema, head)


def explain_failure(error: BaseException, url: str) -> DatabaseState:
    """The state a database error means, told with its fix."""
    chain = _chain(error)
    where, name = database_location(url), make_url(url).database or ""
    if _any(chain, asyncpg.InvalidCatalogNameError):
        return DatabaseState(
            DatabaseStatus.MISSING,
            f'the database "{name}" does not exist on {where}: create it (createdb {name}, '
            f"or CREATE DATABASE {name}), then run `reminders migrate`",
        )
    if _any(chain, asyncpg.UndefinedTableError) or _says(chain, "no such table: alembic_version"):
        return _compare(frozenset())
    if _any(chain, asyncpg.InvalidAuthorizationSpecificationError, asyncpg.InvalidPasswordError):
        user = make_url(url).username or ""
        return DatabaseState(
            DatabaseStatus.UNAVAILABLE,
            f'the database at {where} refused user "{user}" ({_first_line(chain[-1])}): '
            "check the user and password in REMINDERS_DATABASE_URL",
        )
    if _any(chain, socket.gaierror, OSError):
        return DatabaseState(
            DatabaseStatus.UNAVAILABLE,
            f"cannot connect to the database at {where} ({_first_line(chain[-1])}): check the "
            "host and port in REMINDERS_DATABASE_URL and that the server is running",
        )
    if _any(chain, sqlite3.OperationalError):
        return DatabaseState(
            DatabaseStatus.UNAVAILABLE,
            f"cannot open the SQLite database {make_url(url).database} "
            f"({_first_line(chain[-1])}): check that its folder exists and is writable",
        )
    return DatabaseState(
        DatabaseStatus.UNAVAILABLE,
        f"the database at {where} failed: {type(chain[-1]).__name__}: {_first_line(chain[-1])}",
    )


def missing_sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL when it does not exist (connecting would create it empty)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    path = Path(parsed.database or "")
    return None if path.exists() else path


def database_location(url: str) -> str:
    """``host:port`` of a server database, the file of a SQLite one (never a password)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return str(parsed.database)
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}"


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, outermost first (SQLAlchemy keeps the driver's in .orig)."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        orig = getattr(current, "orig", None)
        current = orig if isinstance(orig, BaseException) else current.__cause__
    return chain


def _any(chain: list[BaseException], *kinds: type[BaseException]) -> bool:
    return any(isinstance(error, kinds) for error in chain)


def _says(chain: list[BaseException], text: str) -> bool:
    return any(text in str(error) for error in chain)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
