"""``reminders import FILE.jsonl``: bulk registration from a file, resumable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from app.api.batch import item_validator
from app.cli.common import load_settings, run_in_container
from app.container import Container
from app.domain.registration import ItemResult
from app.services import importer

console = Console(stderr=True)


def import_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSON lines.")],
    restart: Annotated[
        bool, typer.Option("--restart", help="Forget earlier progress on this file.")
    ] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=1000, help="Lines per batch.")] = 1000,
) -> None:
    """Register customers and reminders from a JSON-lines file: one object per line with a
    "type" ("customer" or "reminder") and the fields of a batch item. Interrupted, it
    resumes where it stopped: run the same command again."""
    settings = load_settings()
    _, total = importer.file_source(file)

    async def work(container: Container) -> importer.ImportState:
        columns = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console) as bar:
            task = bar.add_task(file.name, total=total, counts="")

            def show(state: importer.ImportState, refused: list[tuple[int, ItemResult]]) -> None:
                for line, result in refused:
                    problems = "; ".join(problem.message for problem in result.fields)
                    bar.console.print(f"line {line} ({result.id or '?'}): {problems}")
                bar.update(task, completed=state.lines_done, counts=_summary(state.counts))

            return await importer.run_import(
                container.engine,
                file,
                item_validator(container.renderer.knows_kind),
                clock=container.clock,
                on_batch=show,
                batch_size=batch_size,
                start_over=restart,
            )

    state = run_in_container(settings, work)
    typer.echo(json.dumps({"file": str(file), "lines": state.lines_done, **state.counts}))


def _summary(counts: importer.Counts) -> str:
    return "  ".join(
        f"{kind}: " + " ".join(f"{n} {status}" for status, n in totals.items() if n)
        for kind, totals in counts.items()
    )
