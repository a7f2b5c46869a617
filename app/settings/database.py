"""Where the database is (``REMINDERS_DATABASE_*``): all that ``reminders migrate`` needs.

Outside dev mode the URL must be given: a default database would let a misspelt or
forgotten variable run production on an empty ``./reminders.db`` (dev mode uses that file).

Hosting providers hand out ``postgres://`` and ``postgresql://`` URLs (often with
``?sslmode=require``); the service talks to PostgreSQL through asyncpg, so those are
rewritten to ``postgresql+asyncpg://`` (and ``sslmode`` to asyncpg's ``ssl``) instead of
failing on a driver that is not installed.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.settings.problems import gather

DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///./reminders.db"
_POSTGRES = "postgresql+asyncpg"
_SQLITE = "sqlite+aiosqlite"


def normalize_database_url(url: str) -> str:
    """The URL with the async driver this service uses; ValueError when it cannot be one."""
    scheme, _, rest = url.strip().partition("://")
    if not rest:
        raise ValueError(f"REMINDERS_DATABASE_URL is not a URL: {safe_url(url)!r}")
    dialect, _, driver = scheme.lower().partition("+")
    if dialect in ("postgres", "postgresql") and driver in ("", "asyncpg"):
        return _sslmode_as_ssl(f"{_POSTGRES}://{rest}")
    if dialect == "sqlite" and driver in ("", "aiosqlite"):
        return f"{_SQLITE}://{rest}"
    raise ValueError(
        f"REMINDERS_DATABASE_URL must be postgresql://… (or postgres://) or sqlite:///path, "
        f"not {scheme}://…: this service uses the asyncpg and aiosqlite drivers"
    )


def _sslmode_as_ssl(url: str) -> str:
    parts = urlsplit(url)
    query = [("ssl" if key == "sslmode" else key, value) for key, value in parse_qsl(parts.query)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}" if "@" in rest else url


class DatabaseSettings(BaseSettings):
    """The database URL and pool, and how long ``serve`` waits for the database."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    # Local use only: well-known secrets, ./reminders.db unless a URL is given (Settings).
    dev_mode: bool = False
    database_url: str = ""  # required outside dev mode; dev mode: DEFAULT_SQLITE_URL
    database_pool_size: int = Field(default=16, ge=1)
    # PostgreSQL: how many shared ("group commit") statements of each kind, claims and
    # finalizes, may run at once; deliveries arriving meanwhile wait and share the next one.
    database_group_statements: int = Field(default=4, ge=1, le=64)
    # serve retries an unreachable, missing or unmigrated database this long before it
    # gives up (0: refuse at once). For containers started beside their database.
    database_wait_seconds: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("database_url")
    @classmethod
    def _normalize(cls, value: str) -> str:
        return normalize_database_url(value) if value.strip() else ""

    @model_validator(mode="after")
    def _check(self) -> DatabaseSettings:
        # Settings overrides this with its own, which runs the same check among all others.
        gather([self.require_database_url])
        return self

    def require_database_url(self) -> None:
        """Dev mode's default database, or refuse an unset URL outside dev mode."""
        if self.database_url:
            return
        if not self.dev_mode:
            raise ValueError(
                "REMINDERS_DATABASE_URL is not set: outside dev mode name the database "
                "(postgresql://user:password@host/name, or sqlite:///path/reminders.db for one "
                "machine); REMINDERS_DEV_MODE=1 uses ./reminders.db"
            )
        object.__setattr__(self, "database_url", DEFAULT_SQLITE_URL)

    @property
    def is_sqlite(self) -> bool:
        """True when the database is SQLite (writes are then serialized on one connection)."""
        return self.database_url.startswith("sqlite")
