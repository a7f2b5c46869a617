"""Run Alembic programmatically (``reminders migrate``, tests) and read the head revision.

Alembic (~10 MB with Mako) is imported only where it is used: a ``serve`` worker needs just
the revisions, which its supervisor hands it (``hand_revisions_to_children``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

if TYPE_CHECKING:
    from alembic.config import Config

# The migrations ship inside the package: ``app/migrations`` is the top-level ``alembic/``
# folder (a link in the source tree, a copy in the wheel), so an installed wheel migrates
# without the source tree and contributors keep ``alembic upgrade head`` at the top level.
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"

# Set by ``serve`` for its workers: the revisions it read from these same migrations.
REVISIONS_FROM_SUPERVISOR = "_REMINDERS_SERVE_SCHEMA_REVISIONS"


@dataclass(frozen=True, slots=True)
class Revisions:
    """The migrations' revisions: the newest of each branch, and every one they know."""

    heads: frozenset[str]
    known: frozenset[str]


def alembic_config(database_url: str) -> Config:
    """An Alembic config for the packaged migrations and the given database (no ini file)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False
    return config


def upgrade_to_head(database_url: str) -> None:
    """Apply every migration (blocking; call from a thread inside an event loop)."""
    from alembic import command

    command.upgrade(alembic_config(database_url), "head")


def head_revisions() -> frozenset[str]:
    """The newest revision of every migration branch."""
    return _revisions().heads


def known_revisions() -> frozenset[str]:
    """Every revision this version's migrations know (a database past them is newer)."""
    return _revisions().known


def hand_revisions_to_children() -> None:
    """Let the processes started from this one (``serve``'s workers) know the revisions
    without loading Alembic: they run the same installed code, so the same migrations."""
    revisions = _revisions()
    os.environ[REVISIONS_FROM_SUPERVISOR] = json.dumps(
        {"heads": sorted(revisions.heads), "known": sorted(revisions.known)}
    )


@cache
def _revisions() -> Revisions:
    handed = os.environ.get(REVISIONS_FROM_SUPERVISOR)
    if handed:
        fields = json.loads(handed)
        return Revisions(frozenset(fields["heads"]), frozenset(fields["known"]))
    return _read_migrations()


def _read_migrations() -> Revisions:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    known = frozenset(revision.revision for revision in script.walk_revisions())
    return Revisions(frozenset(script.get_heads()), known)


async def applied_revisions(conn: AsyncConnection) -> frozenset[str]:
    """The revisions the database says it is at (``alembic_version``)."""
    rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(rows.scalars())
