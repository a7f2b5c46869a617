"""reminders import: JSON lines through the batch rules, resumable with exact counts."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.adapters.rendering import Renderer
from app.api.batch import item_validator
from app.db import imports_repo
from app.db.engine import create_engine
from app.db.tables import customers, reminders
from app.services import importer
from tests.support.clock import FakeClock

BATCH = 25


@pytest.fixture
async def engine(clean_database_url: str):
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
def validate():
    return item_validator(Renderer().knows_kind)


def reminder_line(reminder_id: str, customer_id: str, due: str) -> dict:
    return {
        "type": "reminder",
        "id": reminder_id,
        "customer_id": customer_id,
        "kind": "weekly_digest",
        "due_at": due,
        "channels": ["email"],
    }


def write_file(path: Path, clock: FakeClock) -> Path:
    """40 customers, 160 reminders (interleaved in places), and four lines that are refused."""
    due = (clock.now + timedelta(days=1)).isoformat()
    lines = []
    for n in range(40):
        lines.append({"type": "customer", "id": f"c{n}", "email": f"c{n}@example.com"})
        if n % 10 == 9:  # reminders of the customers so far, then more customers
            lines += [reminder_line(f"r{n}:{m}", f"c{m % (n + 1)}", due) for m in range(40)]
    text = [json.dumps(line) for line in lines]
    text.insert(5, "")  # blank: skipped
    text.insert(50, "{not json")  # unreadable
    text.insert(60, json.dumps(reminder_line("orphan", "nobody", due)))  # unknown customer
    text.insert(70, json.dumps(reminder_line("r9:1", "c0", "soon")))  # bad due_at
    path.write_text("\n".join(text) + "\n")
    return path


EXPECTED = {
    "customer": {"created": 40, "updated": 0, "unchanged": 0, "error": 0},
    "reminder": {"created": 160, "updated": 0, "unchanged": 0, "error": 2},
    "unreadable": {"created": 0, "updated": 0, "unchanged": 0, "error": 1},
}


async def row_counts(engine) -> tuple[int, int]:
    async with engine.connect() as conn:
        n_customers = (await conn.execute(select(func.count()).select_from(customers))).scalar()
        n_reminders = (await conn.execute(select(func.count()).select_from(reminders))).scalar()
    return n_customers, n_reminders


class Interrupted(Exception):
    """The import process dying between two batches."""


async def test_an_import_interrupted_between_batches_resumes_with_exact_counts(
    engine, validate, clock, tmp_path
):
    """Killed after its third commit, the re-run skips what was applied and finishes: rows and
    counts as if it had run once; a third run of the finished file does nothing."""
    path = write_file(tmp_path / "bulk.jsonl", clock)
    refusals: list[int] = []
    committed = []

    def die_after_three(state, refused):
        refusals.extend(line for line, _ in refused)
        committed.append(state.lines_done)
        if len(committed) == 3:
            raise Interrupted

    with pytest.raises(Interrupted):
        await importer.run_import(
            engine, path, validate, clock=clock, on_batch=die_after_three, batch_size=BATCH
        )
    applied = committed[-1]
    assert 0 < applied < 200 and (await row_counts(engine))[0] > 0

    resumed = []

    def record(state, refused):
        resumed.append(state.lines_done)
        refusals.extend(line for line, _ in refused)

    state = await importer.run_import(
        engine, path, validate, clock=clock, batch_size=BATCH, on_batch=record
    )
    assert resumed[0] > applied  # resumed after the applied lines, none re-read
    assert state.finished and state.counts == EXPECTED
    assert await row_counts(engine) == (40, 160)
    assert refusals == [51, 61, 71]  # 1-based lines: unreadable, unknown customer, bad due_at

    again = await importer.run_import(
        engine, path, validate, clock=clock, batch_size=BATCH, on_batch=lambda *_: None
    )
    assert again.counts == EXPECTED and await row_counts(engine) == (40, 160)


async def test_a_failure_inside_a_batch_rolls_the_batch_back_with_its_progress(
    engine, validate, clock, tmp_path, monkeypatch
):
    """When recording progress fails, that batch's rows are not kept either: the re-run
    applies it again and the counts still match one clean run."""
    path = write_file(tmp_path / "bulk.jsonl", clock)
    real_save, calls = imports_repo.save_progress, []

    async def failing_save(conn, source, **kwargs):
        calls.append(kwargs["lines_done"])
        if len(calls) == 4:
            raise ConnectionResetError("database went away")
        await real_save(conn, source, **kwargs)

    monkeypatch.setattr(imports_repo, "save_progress", failing_save)
    with pytest.raises(ConnectionResetError):
        await importer.run_import(
            engine, path, validate, clock=clock, on_batch=lambda *_: None, batch_size=BATCH
        )
    source, _ = importer.file_source(path)
    partial = await importer.load_state(engine, source, str(path))
    assert partial.lines_done == calls[2]
    assert await row_counts(engine) != (40, 160)

    monkeypatch.setattr(imports_repo, "save_progress", real_save)
    state = await importer.run_import(
        engine, path, validate, clock=clock, on_batch=lambda *_: None, batch_size=BATCH
    )
    assert state.counts == EXPECTED and await row_counts(engine) == (40, 160)


async def test_an_edited_file_or_restart_starts_over_and_counts_unchanged_rows(
    engine, validate, clock, tmp_path
):
    """Starting over re-reads every line: what is already stored counts as unchanged."""
    path = write_file(tmp_path / "bulk.jsonl", clock)
    await importer.run_import(engine, path, validate, clock=clock, on_batch=lambda *_: None)
    state = await importer.run_import(
        engine, path, validate, clock=clock, on_batch=lambda *_: None, start_over=True
    )
    assert state.counts["customer"] == {"created": 0, "updated": 0, "unchanged": 40, "error": 0}
    assert state.counts["reminder"]["unchanged"] == 160
