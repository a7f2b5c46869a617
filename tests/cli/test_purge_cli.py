"""``reminders purge``: the dry run counts, the real run deletes, ``--days`` overrides."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select

from app.db.engine import create_engine
from app.db.tables import customers, reminders
from tests.support.cli import deployment_env, invoke, set_env


@pytest.fixture
def cli_env(settings, monkeypatch):
    """A deployment's environment, pointed at the test database (the real clock)."""
    return set_env(monkeypatch, deployment_env(settings.database_url))


async def _seed(url: str, ages_in_days: dict[str, int]) -> None:
    now = datetime.now(UTC)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                insert(customers).values(
                    id="c1", time_zone="UTC", opted_out_channels=[], created_at=now,
                    updated_at=now,
                )
            )  # fmt: skip
            for reminder_id, days in ages_in_days.items():
                then = now - timedelta(days=days)
                await conn.execute(
                    insert(reminders).values(
                        id=reminder_id, customer_id="c1", kind="renewal", due_at=then,
                        channels=["email"], data={}, state="cancelled", cancelled_at=then,
                        schedule_version=1, created_at=then, updated_at=then,
                    )
                )  # fmt: skip
    finally:
        await engine.dispose()


async def _left(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return set((await conn.execute(select(reminders.c.id))).scalars())
    finally:
        await engine.dispose()


async def _purge(*args: str) -> dict:
    result = await invoke("purge", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


async def test_purge_cli_dry_run_then_purge_then_a_shorter_period(settings, cli_env):
    """90 days by default: the dry run counts the 100-day-old reminder and keeps it, the
    purge deletes it, the 10-day-old one goes only with --days 5."""
    await _seed(settings.database_url, {"old": 100, "recent": 10})
    dry = await _purge("--dry-run")
    assert (dry["dry_run"], dry["reminders"]) == (True, 1)
    assert await _left(settings.database_url) == {"old", "recent"}
    done = await _purge()
    assert (done["reminders"], done["complete"]) == (1, True)
    assert await _left(settings.database_url) == {"recent"}
    assert (await _purge("--days", "5"))["reminders"] == 1
    assert await _left(settings.database_url) == set()
