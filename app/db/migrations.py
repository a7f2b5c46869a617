"""Run Alembic programmatically (``reminders migrate``, tests) and read the head revision."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

# The migrations ship inside the package: ``app/migrations`` is the top-level ``alembic/``
# folder (a link in the source tree, a copy in the wheel), so an installed wheel migrates
# without the source tree and contributors keep ``alembic upgrade head`` at the top level.
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"


def alembic_config(database_url: str) -> Config:
    """An Alembic config for the packaged migrations and the given database (no ini file)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False
    return config


def upgrade_to_head(database_url: str) -> None:
    """Apply every migration (blocking; call from a thread inside an event loop)."""
    command.upgrade(alembic_config(database_url), "head")


@cache
def head_revisions() -> frozenset[str]:
    """The newest revision of every migration branch."""
    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())


@cache
def known_revisions() -> frozenset[str]:
    """Every revision this version's migrations know (a database past them is newer)."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return frozenset(revision.revision for revision in script.walk_revisions())


async def applied_revisions(conn: AsyncConnection) -> frozenset[str]:
    """The revisions the database says it is at (``alembic_version``)."""
    rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(rows.scalars())
