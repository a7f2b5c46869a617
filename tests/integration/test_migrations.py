"""Migrations are the only source of the schema: one head, and no drift from the models."""

from alembic import command
from alembic.script import ScriptDirectory

from app.db.migrations import alembic_config


def test_migrations_have_a_single_head():
    """Feature branches are merged, so `alembic upgrade head` is unambiguous."""
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1, heads


def test_migrated_schema_matches_the_models(database_url):
    """`alembic check` finds nothing to generate against a database migrated to head."""
    command.check(alembic_config(database_url))
