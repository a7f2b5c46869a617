"""``reminders import`` as a real process: killed midway, run again, rows and counts exact."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.db import imports_repo
from app.db.engine import create_engine
from app.db.tables import customers, reminders
from app.services.importer import file_source
from tests.support.cli import deployment_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CUSTOMERS, REMINDERS = 500, 20_000
COMMAND = [sys.executable, "-c", "from app.cli import main; main()", "import"]


def write_file(path: Path) -> Path:
    with path.open("w") as out:
        for n in range(CUSTOMERS):
            out.write(json.dumps({"type": "customer", "id": f"c{n}", "email": f"c{n}@x.org"}))
            out.write("\n")
        for n in range(REMINDERS):
            item = {
                "type": "reminder",
                "id": f"r{n}",
                "customer_id": f"c{n % CUSTOMERS}",
                "kind": "weekly_digest",
                "due_at": "2030-01-01T09:00:00Z",
                "channels": ["email"],
            }
            out.write(json.dumps(item) + "\n")
    return path


async def lines_done(engine, source: str) -> int:
    async with engine.connect() as conn:
        row = await imports_repo.get_progress(conn, source)
    return 0 if row is None else row["lines_done"]


async def test_a_killed_import_resumes_without_duplicates(settings, tmp_path):
    """SIGKILL once some batches committed; the re-run finishes: every row once, counts of
    one run, and the first run's committed lines were not applied again."""
    path = write_file(tmp_path / "bulk.jsonl")
    source, total = file_source(path)
    env = {**os.environ, **deployment_env(settings.database_url)}
    engine = create_engine(settings.database_url)
    try:
        process = await asyncio.create_subprocess_exec(
            *COMMAND, str(path), "--batch-size", "100", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while await lines_done(engine, source) < 2000:
            assert time.monotonic() < deadline and process.returncode is None
            await asyncio.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        killed_at = await lines_done(engine, source)
        assert killed_at < total, "the import finished before it could be killed"

        again = await asyncio.create_subprocess_exec(
            *COMMAND, str(path), env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        out, _ = await again.communicate()
        assert again.returncode == 0
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["lines"] == total
        assert report["customer"] == {
            "created": CUSTOMERS,
            "updated": 0,
            "unchanged": 0,
            "error": 0,
        }
        assert report["reminder"] == {
            "created": REMINDERS,
            "updated": 0,
            "unchanged": 0,
            "error": 0,
        }
        async with engine.connect() as conn:
            for table, expected in ((customers, CUSTOMERS), (reminders, REMINDERS)):
                count = await conn.execute(select(func.count()).select_from(table))
                assert count.scalar() == expected
    finally:
        await engine.dispose()
