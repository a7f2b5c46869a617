"""``reminders purge``: delete what the retention period says is old, in short batches."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from app.cli.common import load_settings, run_in_container
from app.container import Container
from app.services.retention import RetentionPolicy, preview_purge, purge

console = Console(stderr=True)


def purge_command(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be deleted; delete nothing.")
    ] = False,
    days: Annotated[
        float | None,
        typer.Option(help="Retention in days (default REMINDERS_RETENTION_DAYS).", min=0.0),
    ] = None,
) -> None:
    """Delete done and cancelled reminders (with their ledger rows) and redriven dead letters
    unchanged for the retention period, batch by batch, until none are left."""
    settings = load_settings()
    keep = settings.retention_days if days is None else days
    if keep <= 0:
        console.print("[yellow]retention is off (REMINDERS_RETENTION_DAYS=0): nothing to do[/]")
        return
    policy = RetentionPolicy(keep, settings.retention_batch_size)

    async def work(container: Container) -> dict[str, object]:
        now = container.clock()
        if dry_run:
            return (await preview_purge(container.engine, now=now, policy=policy)).to_json()
        return (await purge(container.engine, now=now, policy=policy)).to_json()

    typer.echo(json.dumps(run_in_container(settings, work)))
