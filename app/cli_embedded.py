"""Embedded-queue commands of the ``reminders`` CLI: ``dispatch`` and ``demo``.

Thin: each builds what it needs from settings, runs one service, prints, and exits
non-zero on failure. Registered on the main Typer app in ``app/cli.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import shutil
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.adapters.queues.embedded import DispatchReport, dispatcher_from_settings
from app.cli_common import load_settings as _settings
from app.db.engine import create_engine
from app.db.migrations import upgrade_to_head
from app.settings import Settings

console = Console()
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def local_base_url(host: str, port: int) -> str:
    """The loopback URL of a server bound to ``host:port`` (wildcards become loopback)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def use_bound_address_for_pushes(host: str, port: int) -> None:
    """``reminders serve``: the in-process dispatcher pushes to this very server by default."""
    os.environ.setdefault("REMINDERS_EMBEDDED_PUSH_BASE_URL", local_base_url(host, port))


def dispatch_command(
    once: Annotated[
        bool, typer.Option("--once", help="Deliver what is due now, print a report, exit.")
    ] = False,
    concurrency: Annotated[
        int | None, typer.Option(help="Concurrent pushes (REMINDERS_EMBEDDED_CONCURRENCY).")
    ] = None,
) -> None:
    """Run the embedded queue's dispatcher alone (SIGTERM/SIGINT stop it gracefully)."""
    settings = _settings()
    if settings.queue != "embedded":
        console.print(f"[red]REMINDERS_QUEUE={settings.queue}: nothing to dispatch[/red]")
        raise typer.Exit(2)
    if concurrency is not None:
        embedded = settings.embedded.model_copy(update={"concurrency": max(1, concurrency)})
        settings = settings.model_copy(update={"embedded": embedded})
    logging.basicConfig(level=logging.INFO, format=_LOG_FORMAT)
    report = asyncio.run(_dispatch(settings, once=once))
    console.print_json(
        json.dumps(
            {
                "claimed": report.claimed,
                "acknowledged": report.acknowledged,
                "redelivering": report.redelivering,
                "dead": report.dead,
                "expired": report.expired,
                "outcomes": dict(report.outcomes),
            }
        )
    )


async def _dispatch(settings: Settings, *, once: bool) -> DispatchReport:
    from app.main import utc_now

    engine = create_engine(settings.database_url, pool_size=settings.database_pool_size)
    dispatcher, pusher = dispatcher_from_settings(
        settings, engine, clock=utc_now, rand=random.SystemRandom()
    )
    total = DispatchReport()
    try:
        if once:
            while (report := await dispatcher.run_once()).claimed:
                total.add(report)
            total.add(report)
        else:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, stop.set)
            logging.getLogger("reminders.embedded_queue").info(
                "dispatching to %s, %d at a time", dispatcher.target.base_url,
                settings.embedded.concurrency,
            )  # fmt: skip
            total = await dispatcher.run(
                stop, poll_interval=settings.embedded.poll_interval_seconds
            )
    finally:
        if pusher is not None:
            await pusher.close()
        await engine.dispose()
    return total


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
    from app.demo.scenario import STEPS, Demo, check_result

    directory.mkdir(parents=True, exist_ok=True)
    url = database_url or _fresh_sqlite(directory)
    shutil.rmtree(directory / "outbox", ignore_errors=True)
    upgrade_to_head(url)
    asyncio.run(_refuse_used_database(url))
    console.print(f"[bold]reminder-relay demo[/bold] on {_safe(url)}")
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

        result = asyncio.run(Demo(directory, url, on_step=on_step, on_event=on_event).run())
        progress.update(task, completed=len(STEPS), description="done")
    _print_summary(result)
    problems = check_result(result)
    for problem in problems:
        console.print(f"[red]unexpected:[/red] {problem}")
    if problems:
        raise typer.Exit(1)
    console.print("[green]every path ended as designed[/green]")


def _fresh_sqlite(directory: Path) -> str:
    database = directory / "demo.db"
    for suffix in ("", "-wal", "-shm"):  # only the demo's own files
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    return f"sqlite+aiosqlite:///{database.resolve()}"


async def _refuse_used_database(url: str) -> None:
    from app.db import summary_repo

    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            used = bool(await summary_repo.ledger_rows(conn))
    finally:
        await engine.dispose()
    if used:
        console.print("[red]the demo needs an empty database; this one has reminders[/red]")
        raise typer.Exit(2)


def _safe(url: str) -> str:
    # Never print a password that may be part of the URL.
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}" if "@" in rest else url


def _print_summary(result: object) -> None:
    from app.demo.scenario import DemoResult, format_offset

    assert isinstance(result, DemoResult)
    table = Table(title="Outcomes, read back from the send ledger")
    for column in ("reminder", "channel", "ledger", "outcome", "tries", "sent at"):
        table.add_column(column, no_wrap=True)
    table.add_column("queue answers")
    for row in result.rows:
        sent_at, channel = row["sent_at"], row["channel"]
        table.add_row(
            row["reminder_id"].removeprefix("demo:"),
            channel or "—",
            row["state"] or row["reminder_state"],
            row["outcome"] or "—",
            str(row["attempt_count"] or 0),
            format_offset(sent_at - result.started_at) if sent_at else "—",
            ", ".join(result.answers.get(f"{row['reminder_id']} {channel}", [])) or "—",
        )
    console.print(table)
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
