"""Migrations are the only source of the schema: one head, and no drift from the models."""

import asyncio
import json
import os
import subprocess
import sys
import textwrap

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import text

from app.db.engine import create_engine
from app.db.migrations import (
    REVISIONS_FROM_SUPERVISOR,
    alembic_config,
    hand_revisions_to_children,
    head_revisions,
)
from tests.e2e.processes import service_env


def test_migrations_have_a_single_head():
    """Feature branches are merged, so `alembic upgrade head` is unambiguous."""
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1, heads


def test_migrated_schema_matches_the_models(database_url):
    """`alembic check` finds nothing to generate against a database migrated to head."""
    command.check(alembic_config(database_url))


def test_no_index_is_the_leading_part_of_another(database_url):
    """An index whose columns begin another index of the same table serves no query the
    longer one does not, and costs a write on every insert and every change of its
    columns: 0019 dropped two on ``reminders`` (written twice per reminder, by the sweep
    and by the finalize). Unique indexes are constraints, not lookups, and are left out."""
    found = asyncio.run(_indexes(database_url))
    redundant = [
        (table, name, other)
        for table, indexes in found.items()
        for name, (columns, unique) in indexes.items()
        for other, (longer, _) in indexes.items()
        if other != name and not unique and len(longer) > len(columns)
        and longer[: len(columns)] == columns
    ]  # fmt: skip
    assert redundant == []


async def _indexes(url: str) -> dict[str, dict[str, tuple[list[str], bool]]]:
    from sqlalchemy import inspect

    def read(sync_conn) -> dict[str, dict[str, tuple[list[str], bool]]]:
        inspector = inspect(sync_conn)
        return {
            table: {
                index["name"]: (list(index["column_names"]), bool(index["unique"]))
                for index in inspector.get_indexes(table)
            }
            for table in inspector.get_table_names()
        }

    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(read)
    finally:
        await engine.dispose()


def test_0017_gives_done_reminders_their_delivery_summary_in_place(database_url):
    """Reminders already done when 0017 runs get the summary the settle would write from
    their send records (undelivered for the dead-lettered one); open ones get none."""
    from tests.conftest import empty_all_tables
    from tests.integration.test_delivery_summary import CASES

    asyncio.run(empty_all_tables(database_url))
    config = alembic_config(database_url)
    command.downgrade(config, "0015_send_attempts")
    try:
        asyncio.run(_seed_done_reminders(database_url, CASES))
    finally:
        command.upgrade(config, "head")
    found = asyncio.run(_deliveries(database_url))
    expected = {f"r-{case}": summary for case, (_, summary, _) in CASES.items()}
    assert found == expected | {"r-open": None}
    asyncio.run(empty_all_tables(database_url))


async def _seed_done_reminders(url: str, cases: dict) -> None:
    from tests.integration.test_delivery_summary import NOW

    engine = create_engine(url)
    at = {"created_at": NOW, "updated_at": NOW}
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO customers (id, email, time_zone, opted_out_channels, created_at,"
                    " updated_at) VALUES ('c', 'u@example.com', 'UTC', '[]', :created_at,"
                    " :updated_at)"
                ),
                at,
            )
            done = {f"r-{case}": rows for case, (rows, _, _) in cases.items()}
            done["r-open"] = [("email", "a", ("sent", "sent"))]
            for rid, rows in done.items():
                state = "enqueued" if rid == "r-open" else "done"
                await conn.execute(
                    text(
                        "INSERT INTO reminders (id, customer_id, kind, due_at, channels, data,"
                        " state, schedule_version, created_at, updated_at) VALUES (:id, 'c',"
                        " 'weekly_digest', :created_at, '[]', '{}', :state, 1, :created_at,"
                        " :updated_at)"
                    ),
                    {"id": rid, "state": state, **at},
                )
                for channel, provider, (row_state, outcome) in rows:
                    await conn.execute(
                        text(
                            "INSERT INTO send_records (reminder_id, channel, provider, state,"
                            " outcome, attempt_count, attempt_budget_start, idempotency_key,"
                            " redrive_count, created_at, updated_at) VALUES (:rid, :channel,"
                            " :provider, :state, :outcome, 1, 0, :key, 0, :created_at,"
                            " :updated_at)"
                        ),
                        {"rid": rid, "channel": channel, "provider": provider, "state": row_state,
                         "outcome": outcome, "key": f"{rid}:{channel}:{provider}", **at},
                    )  # fmt: skip
    finally:
        await engine.dispose()


async def _deliveries(url: str) -> dict[str, str | None]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT id, delivery FROM reminders"))
            return {row.id: row.delivery for row in rows}
    finally:
        await engine.dispose()


def test_a_serve_worker_compares_schemas_without_loading_alembic(database_url, tmp_path):
    """``serve`` hands its workers the revisions it read; each worker's app and its
    readiness check then use them, without Alembic and Mako (~10 MB a worker)."""
    env = {**_handed_environment(), **service_env(database_url, tmp_path / "outbox")}
    worker = textwrap.dedent(
        """
        import asyncio, os, sys
        from app.db.engine import create_engine
        from app.db.readiness import inspect_database
        from app.supervisor import create_worker_app

        create_worker_app()
        engine = create_engine(os.environ["REMINDERS_DATABASE_URL"])
        state = asyncio.run(inspect_database(engine, timeout=10))
        print(state.status, ",".join(state.head), "alembic" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", worker], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ready", ",".join(sorted(head_revisions())), "False"]


def test_revisions_handed_to_workers_are_the_ones_alembic_reads():
    handed = json.loads(_handed_environment()[REVISIONS_FROM_SUPERVISOR])
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert handed == {
        "heads": sorted(script.get_heads()),
        "known": sorted(revision.revision for revision in script.walk_revisions()),
    }


def _handed_environment() -> dict[str, str]:
    """This process's environment as ``serve`` passes it to its workers (this one's own
    environment is left as it was)."""
    try:
        hand_revisions_to_children()
        return dict(os.environ)
    finally:
        os.environ.pop(REVISIONS_FROM_SUPERVISOR, None)
