"""Which database errors mean "not now" (retry the statement) rather than "refused".

One classification for both drivers, by the error's code, not by a kept list of exception
types: a list misses the types nobody thought of (57P03, what every PostgreSQL restart,
failover and recovery answers, was missing, and the finalize after an accepted send was
dropped; the redelivery sent the message again).

PostgreSQL, by SQLSTATE: class 08 (connection exception), 57P01-57P05 (the server shut
down, crashed, is starting or recovering, dropped the database, or ended an idle session),
53300 (too many connections), 57014 (statement timeout or cancel) and 55P03 (lock timeout).
SQLite, by its result code: SQLITE_BUSY and SQLITE_LOCKED (a lock not granted in time, its
statement timeout), SQLITE_CANTOPEN, SQLITE_IOERR and SQLITE_PROTOCOL (the file could not
be reached). And on either: the socket or the pool failed before the database answered.

A statement that failed this way did not commit, or may have: every ledger write is fenced
(its state and attempt), so running it again is safe.
"""

from __future__ import annotations

import sqlite3

UNAVAILABLE_SQLSTATE_CLASSES = frozenset({"08"})
UNAVAILABLE_SQLSTATES = frozenset(
    {"57P01", "57P02", "57P03", "57P04", "57P05", "53300", "57014", "55P03"}
)
UNAVAILABLE_SQLITE_CODES = frozenset(
    {"SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_PROTOCOL"}
)
# pysqlite before 3.11 carries no error name: the primary codes' messages.
_SQLITE_MESSAGES = ("database is locked", "unable to open database", "disk i/o error")


def is_unavailable(error: BaseException) -> bool:
    """True when ``error`` (a driver's, or SQLAlchemy's wrapping one) says the database could
    not be reached or could not answer in time, so the same statement may succeed later;
    False when the database refused the statement itself (a constraint, bad SQL)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "connection_invalidated", False) or _unavailable(current):
            return True
        # SQLAlchemy keeps the driver's error in ``orig``; its asyncpg adapter chains it.
        current = getattr(current, "orig", None) or current.__cause__
    return False


def _unavailable(error: BaseException) -> bool:
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        return sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES or sqlstate in UNAVAILABLE_SQLSTATES
    if isinstance(error, sqlite3.Error):
        return _sqlite_unavailable(error)
    if isinstance(error, OSError | TimeoutError | ConnectionError):
        return True  # the socket: refused, reset, or the connect timed out
    # asyncpg's own client-side failures: the connection closed or broke under a statement.
    return type(error).__name__ in {"InterfaceError", "InternalClientError"} and (
        type(error).__module__.startswith("asyncpg")
    )


def _sqlite_unavailable(error: sqlite3.Error) -> bool:
    name = getattr(error, "sqlite_errorname", None)
    if isinstance(name, str):
        # Extended codes carry the primary one first (SQLITE_IOERR_WRITE, SQLITE_BUSY_SNAPSHOT).
        return any(name == code or name.startswith(code + "_") for code in UNAVAILABLE_SQLITE_CODES)
    message = str(error).lower()
    return any(text in message for text in _SQLITE_MESSAGES)
