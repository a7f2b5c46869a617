"""``reminders import FILE.jsonl``: customers and reminders from JSON lines, resumable.

Each line is one object with a ``type`` (``customer`` or ``reminder``) and the fields of the
matching batch item (``id`` plus the PUT body). Consecutive lines of one type go in batches
through the same registration service as the batch API, so a line is created, updated or
left unchanged exactly as its PUT would be.

Each batch is applied in one transaction together with the file's progress row (lines done,
counts so far). An interruption anywhere (a crash, a kill, a lost connection) therefore leaves
the file before or after a whole batch: a re-run skips exactly the lines already applied, no
row is written twice, and the counts add up as if the import had run once.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import imports_repo
from app.domain.registration import FieldError, ItemResult, ItemStatus
from app.services import registration

KINDS = ("customer", "reminder")
# validate(kind, raw items) -> (valid (id, values) items, {position: refusal})
Validate = Callable[
    [str, Sequence[Any]], tuple[list[tuple[str, dict[str, Any]]], dict[int, ItemResult]]
]


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """Consecutive lines of one type, validated, ready to apply."""

    kind: str
    end_line: int  # the file's lines up to this one are done once the batch is applied
    valid: list[tuple[str, dict[str, Any]]]
    valid_lines: list[int]  # the line of each valid item
    refused: list[tuple[int, ItemResult]]  # (line number, why), items of this kind
    unreadable: list[tuple[int, ItemResult]] = field(default_factory=list)  # no object/type


Counts = dict[str, dict[str, int]]  # {"customer": {"created": n, ...}, "reminder": {...}}


@dataclass(slots=True)
class ImportState:
    """Where an import of one file stands; ``counts`` are totals over every run."""

    source: str
    path: str
    lines_done: int = 0
    counts: Counts = field(default_factory=dict)
    finished: bool = False


def add_counts(counts: Counts, kind: str, results: Iterable[ItemResult]) -> Counts:
    """New totals: ``counts`` with each result counted under ``kind`` and its status."""
    totals = {name: dict(values) for name, values in counts.items()}
    of_kind = totals.setdefault(kind, {status.value: 0 for status in ItemStatus})
    for status, number in Counter(result.status.value for result in results).items():
        of_kind[status] = of_kind.get(status, 0) + number
    return totals


def file_source(path: Path) -> tuple[str, int]:
    """The identity of a file's content (sha256: the same file resumes, an edited one starts
    over) and its number of lines."""
    digest, lines = hashlib.sha256(), 0
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk
    if lines == 0 or not last.endswith(b"\n"):
        lines += 1 if path.stat().st_size else 0
    return digest.hexdigest(), lines


def numbered_lines(path: Path, *, after: int = 0) -> Iterator[tuple[int, bytes]]:
    """The file's lines numbered from 1, skipping the first ``after`` (already applied)."""
    with path.open("rb") as stream:
        for number, line in enumerate(stream, start=1):
            if number > after:
                yield number, line


class _Pending:
    """The lines of the batch being gathered."""

    def __init__(self) -> None:
        self.kind = ""
        self.raws: list[Any] = []
        self.numbers: list[int] = []
        self.unreadable: list[tuple[int, ItemResult]] = []

    def take(self, kind: str, item: Any, number: int) -> None:
        self.kind = kind
        self.raws.append(item)
        self.numbers.append(number)

    def batch(self, validate: Validate, end_line: int) -> PreparedBatch:
        valid, invalid = validate(self.kind, self.raws) if self.raws else ([], {})
        refused = [(self.numbers[i], result) for i, result in invalid.items()]
        valid_lines = [n for i, n in enumerate(self.numbers) if i not in invalid]
        return PreparedBatch(self.kind, end_line, valid, valid_lines, refused, self.unreadable)


def _line(refusal: tuple[int, ItemResult]) -> int:
    return refusal[0]


def prepare_batches(
    lines: Iterable[tuple[int, bytes]], validate: Validate, *, batch_size: int = 1000
) -> Iterator[PreparedBatch]:
    """Group numbered lines into validated batches of one type (at most ``batch_size``).

    A blank line is skipped; a line that is not a JSON object with a known ``type`` is refused
    on its own (an ``error`` result with its line number) without stopping the import.
    """
    pending, last = _Pending(), 0
    for number, line in lines:
        if line.strip():
            item, kind = _parse(line)
            if kind not in KINDS:
                problem = FieldError("type", f"not a JSON object with a type in {KINDS}")
                pending.unreadable.append((number, ItemResult.invalid("", [problem])))
            else:
                if pending.raws and (kind != pending.kind or len(pending.raws) >= batch_size):
                    yield pending.batch(validate, last)
                    pending = _Pending()
                pending.take(kind, item, number)
        last = number
    if last:
        yield pending.batch(validate, last)


def _parse(line: bytes) -> tuple[Any, str | None]:
    """The item without its ``type``, and the type (None when there is none)."""
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(item, dict):
        return None, None
    kind = item.pop("type", None)
    return item, kind if isinstance(kind, str) else None


async def load_state(engine: AsyncEngine, source: str, path: str) -> ImportState:
    """Where an earlier import of this content stopped (a fresh state when never run)."""
    async with engine.connect() as conn:
        row = await imports_repo.get_progress(conn, source)
    if row is None:
        return ImportState(source, path)
    return ImportState(
        source, path, row["lines_done"], row["counts"], row["finished_at"] is not None
    )


async def restart(engine: AsyncEngine, source: str) -> None:
    """Forget an import's progress, so the next run reads the file from its first line."""
    async with engine.begin() as conn:
        await imports_repo.forget_progress(conn, source)


async def apply_batch(
    engine: AsyncEngine, state: ImportState, batch: PreparedBatch, *, now: datetime
) -> list[tuple[int, ItemResult]]:
    """Register one batch and advance the progress row in the same transaction; returns
    the refused lines. ``state`` moves only once the transaction committed."""
    async with engine.begin() as conn:
        results: list[ItemResult] = []
        if batch.valid:
            results = await registration.put_items(conn, batch.kind, batch.valid, now=now)
        counts = state.counts
        if batch.kind:
            counts = add_counts(counts, batch.kind, [*results, *(r for _, r in batch.refused)])
        if batch.unreadable:
            counts = add_counts(counts, "unreadable", (r for _, r in batch.unreadable))
        await imports_repo.save_progress(
            conn, state.source, path=state.path, lines_done=batch.end_line, counts=counts, now=now
        )
    state.lines_done, state.counts = batch.end_line, counts
    refused = [
        (line, result)
        for line, result in zip(batch.valid_lines, results, strict=True)
        if result.status is ItemStatus.ERROR
    ]
    return sorted(batch.unreadable + batch.refused + refused, key=_line)


OnBatch = Callable[[ImportState, list[tuple[int, ItemResult]]], None]


async def run_import(
    engine: AsyncEngine,
    path: Path,
    validate: Validate,
    *,
    clock: Callable[[], datetime],
    on_batch: OnBatch,
    batch_size: int = 1000,
    start_over: bool = False,
) -> ImportState:
    """Apply the file from where an earlier run stopped; ``on_batch`` after each commit."""
    source, _ = file_source(path)
    if start_over:
        await restart(engine, source)
    state = await load_state(engine, source, str(path))
    if state.finished:
        return state
    lines = numbered_lines(path, after=state.lines_done)
    for batch in prepare_batches(lines, validate, batch_size=batch_size):
        on_batch(state, await apply_batch(engine, state, batch, now=clock()))
    await finish(engine, state, now=clock())
    return state


async def finish(engine: AsyncEngine, state: ImportState, *, now: datetime) -> None:
    """Record that the whole file was applied."""
    async with engine.begin() as conn:
        await imports_repo.mark_finished(conn, state.source, now=now)
    state.finished = True
