"""``reminders demo``: every path on a fresh database, shown step by step."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.cli.tables import Column, fitted_table
from app.db.migrations import upgrade_to_head
from app.settings.database import safe_url

console = Console()


def demo_command(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where the demo database and outbox go.")
    ] = Path("./reminders-demo"),
    database_url: Annotated[
        str | None,
        typer.Option(help="An empty database instead of a fresh SQLite file in --dir."),
    ] = None,
) -> None:
    """Show every path on a fresh database: sweep, push, send, retry, dead-letter."""
    from app.demo.cases import STEPS, check_result
    from app.demo.scenario import DatabaseInUse, Demo

    directory.mkdir(parents=True, exist_ok=True)
    url = database_url or _fresh_sqlite(directory)
    shutil.rmtree(directory / "outbox", ignore_errors=True)
    upgrade_to_head(url)
    console.print(f"[bold]reminder-relay demo[/bold] on {safe_url(url)}")
    with Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("starting", total=len(STEPS))
        steps_seen: list[str] = []

        def on_step(step: str) -> None:
            if steps_seen:
                progress.advance(task)
            steps_seen.append(step)
            progress.update(task, description=step)
            progress.console.print(f"[bold cyan]▸ {step}[/bold cyan]")

        def on_event(event: str) -> None:
            progress.console.print(f"   [dim]{escape(event)}[/dim]")

        try:
            result = asyncio.run(Demo(directory, url, on_step=on_step, on_event=on_event).run())
        except DatabaseInUse as error:
            progress.stop()
            console.print(f"[red]{error}[/red]")
            raise typer.Exit(2) from None
        progress.update(task, completed=len(STEPS), description="done")
    _print_summary(result)
    problems = check_result(result)
    for problem in problems:
        console.print(f"[red]unexpected:[/red] {problem}")
    if problems:
        raise typer.Exit(1)
    console.print("[green]every path ended as designed[/green]")
    _print_next_steps(directory, database_url or f"sqlite+aiosqlite:///{directory / 'demo.db'}")


def _print_next_steps(directory: Path, url: str) -> None:
    """Why two rows read as they do, and what to try next."""
    console.print(
        "\n[bold]Why 'cancelled' and 'suppressed' are final without a send:[/bold] the "
        "message was already in the queue when the reminder was cancelled or the customer "
        "unsubscribed. The receiver reloads the reminder and the customer at delivery, finds "
        "there is nothing to send, records that decision in the ledger (state "
        "terminal_failure: no provider call will ever be made; the outcome says why) and "
        "acknowledges the message so the queue stops delivering it. 'stale' works the same "
        "way for a message of an older plan; the new plan's message was sent."
    )
    console.print("\n[bold]Try next:[/bold]")
    on_demo_db = f"REMINDERS_DEV_MODE=1 \\\n  REMINDERS_DATABASE_URL={safe_url(url)} \\\n  "
    for command, why in (
        (
            "REMINDERS_DEV_MODE=1 reminders serve",
            "the service, its API docs (/docs), /admin",
        ),
        (f"{on_demo_db}reminders dead-letters list", "the demo's dead letter, and why it died"),
        (f"ls {directory / 'outbox' / 'email'}", "the emails it wrote, as .eml files"),
        ("docs/architecture.md", "how the ledger decides each of these outcomes"),
    ):
        # soft_wrap: a command is printed whole, so that it can be copied as it is.
        console.print(f"  {why}:\n  [cyan]{escape(command)}[/cyan]", soft_wrap=True)


def _fresh_sqlite(directory: Path) -> str:
    database = directory / "demo.db"
    for suffix in ("", "-wal", "-shm"):  # only the demo's own files
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    return f"sqlite+aiosqlite:///{database.resolve()}"


def _print_summary(result: object) -> None:
    from app.demo.cases import DemoResult, format_offset

    assert isinstance(result, DemoResult)
    columns = [
        Column("reminder", min_width=12),
        Column("channel"),
        Column("outcome"),
        Column("tries", justify="right"),
        Column("queue answers", min_width=14),
        Column("sent at", priority=1),
        Column("ledger state", priority=2),
    ]
    rows = []
    for row in result.rows:
        sent_at, channel = row["sent_at"], row["channel"]
        rows.append(
            [
                row["reminder_id"].removeprefix("demo:"),
                channel or "—",
                row["outcome"] or "—",
                str(row["attempt_count"] or 0),
                ", ".join(result.answers.get(f"{row['reminder_id']} {channel}", [])) or "—",
                format_offset(sent_at - result.started_at) if sent_at else "—",
                row["state"] or row["reminder_state"],
            ]
        )
    title = "Outcomes, read back from the send ledger"
    console.print(fitted_table(title, columns, rows, width=console.width))
    counts = Table(title="Ledger rows by state and outcome")
    counts.add_column("state")
    counts.add_column("outcome")
    counts.add_column("rows", justify="right")
    for (state, outcome), count in sorted(result.counts.items(), key=lambda item: item[0][0]):
        counts.add_row(state, outcome or "—", str(count))
    console.print(counts)
    console.print(
        f"dead-letter set: {result.dead_letters} row(s); embedded queue: "
        f"{result.queue.get('ready', 0)} waiting, {result.queue.get('dead', 0)} in its dead list"
    )
    console.print(f"webhook endpoint requests: {dict(sorted(result.webhook_requests.items()))}")
    console.print(f"outbox (the email files): [bold]{result.outbox}[/bold]")
