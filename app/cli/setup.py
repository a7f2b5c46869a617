"""``reminders setup --queue KIND`` and ``reminders check``: each queue kind's own ``setup``
and ``check`` steps (``app/adapters/queues/<kind>/``), run and printed the same way.

``pubsub`` creates topics, dead-letter topics and push subscriptions; ``cloudtasks`` creates
queues with their retry configuration; ``infrai`` creates queues, DLQs, push subscriptions
and the sweep cron; ``rabbitmq`` declares quorum queues, delay buckets and dead-letter
exchanges; ``sqs`` creates queues and their DLQs. Without ``--queue``, every kind the
configuration uses that has something to set up. The options some kinds read (``--dry-run``,
``--pull``, ``--discovery-file``, ``--skip-queues``) reach every kind as ``ToolOptions``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.kind import CHECK_TITLE, QueueKind, Report, SetupRefused, ToolOptions
from app.adapters.queues.kinds import KINDS_BY_NAME, QUEUE_KINDS
from app.cli.common import load_settings, run_in_container
from app.container import Container
from app.domain.errors import ReminderRelayError
from app.settings import Settings

console = Console()
SETUP_KINDS = tuple(k.name for k in QUEUE_KINDS if k.setup is not None)
# The colour of a result word; any other word (updated, declared…) is cyan.
_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "created": "green",
    "subscribed": "green",
    "differs": "yellow",
    "failed": "red",
}


def setup_command(
    queue: Annotated[
        str | None,
        typer.Option("--queue", "-q", help=f"One of {', '.join(SETUP_KINDS)}; default: in use."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Infrai only: print the calls; make none.")
    ] = False,
) -> None:
    """Create the queue resources this configuration needs (idempotent: run on every deploy)."""
    settings = load_settings()
    kinds = [queue] if queue else [k for k in SETUP_KINDS if k in settings.queue_kinds_in_use]
    for kind in kinds:
        if kind not in SETUP_KINDS:
            console.print(f"[red]--queue must be one of {', '.join(SETUP_KINDS)}[/red]")
            raise typer.Exit(2)
        if kind not in settings.queue_kinds_in_use:
            console.print(f"[red]no channel uses the {kind} queue (REMINDERS_QUEUE)[/red]")
            raise typer.Exit(2)
    for kind in kinds:
        run_setup(KINDS_BY_NAME[kind], settings, ToolOptions(dry_run=dry_run))


def run_setup(kind: QueueKind, settings: Settings, options: ToolOptions) -> None:
    """Run one kind's setup and print its table; exit 1 when it failed, 2 when refused."""
    # The kind's setup module comes from its extra, which the settings required already.
    setup = kind.setup
    assert setup is not None

    async def work() -> Report:
        http = SharedHttp()  # no container: setup needs neither the database nor a provider
        try:
            report: Report = await setup(settings, http, options)
            return report
        finally:
            await http.aclose()

    try:
        report = asyncio.run(work())
    except SetupRefused as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from None
    except ReminderRelayError as error:  # say what the queue's API refused
        console.print(f"[red]{kind.name} setup failed: {error}[/red]")
        raise typer.Exit(1) from None
    _print(report)
    if report.failed:
        raise typer.Exit(1)


def check_command(
    discovery_file: Annotated[
        Path | None,
        typer.Option(help="Validate against a recorded discovery file instead of fetching it."),
    ] = None,
    pull: Annotated[
        bool, typer.Option("--pull", help="Pull deployment: no push subscriptions.")
    ] = False,
    skip_queues: Annotated[
        bool, typer.Option("--skip-queues", help="Do not verify queues and the cron (no key).")
    ] = False,
) -> None:
    """Check the queues are set up (Infrai: also that its schemas accept our requests)."""
    settings = load_settings()
    options = ToolOptions(pull=pull, discovery_file=discovery_file, skip_queues=skip_queues)
    in_use = settings.queue_kinds_in_use
    kinds = [k for k in QUEUE_KINDS if k.check is not None and k.name in in_use]
    if not kinds:
        console.print(
            f"nothing to check: no check for the queues in use ({', '.join(sorted(in_use))})"
        )
        return

    async def run(container: Container) -> list[Report]:
        http = container.http
        assert http is not None  # open_container always builds the shared pool
        return [await kind.check(settings, http, options) for kind in kinds if kind.check]

    reports = run_in_container(settings, run)
    # One table for every kind; its title is the first kind's own, if one names itself.
    title = next((r.title for r in reports if r.title != CHECK_TITLE), CHECK_TITLE)
    _print(Report(title, reports[0].columns, [row for r in reports for row in r.rows]))
    if any(report.failed for report in reports):
        console.print("[red]check failed[/red]")
        raise typer.Exit(1)
    console.print("[green]check passed[/green]")


def _print(report: Report) -> None:
    """The report as a table, its ``result`` column coloured by word."""
    table = Table(title=report.title)
    for column in report.columns:
        table.add_column(column, overflow="fold")
    result = report.columns.index("result")
    for row in report.rows:
        style = _STYLE.get(row[result].lower(), "cyan")
        cells = list(row)
        cells[result] = f"[{style}]{row[result]}[/{style}]"
        table.add_row(*cells)
    console.print(table)
