"""``reminders setup --queue KIND``: create what a queue kind needs, idempotently.

The kinds with a ``setup`` (``app/adapters/queues/<kind>/``) and ``infrai``, which is
``setup-infrai``: ``pubsub`` creates topics, dead-letter topics and push subscriptions;
``cloudtasks`` creates queues with their retry configuration; ``rabbitmq`` declares quorum
queues, delay buckets and dead-letter exchanges; ``sqs`` creates queues and their DLQs.
Without ``--queue``, every kind the configuration uses that has something to set up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.kind import QueueKind
from app.adapters.queues.kinds import KINDS_BY_NAME, QUEUE_KINDS
from app.cli.common import load_settings
from app.cli.infrai import setup_infrai_command
from app.domain.errors import ReminderRelayError
from app.settings import Settings

console = Console()
# Infrai's setup is a command of its own (a dry run, its own table).
SETUP_KINDS = tuple(k.name for k in QUEUE_KINDS if k.setup is not None or k.name == "infrai")


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
        if kind == "infrai":
            setup_infrai_command(dry_run=dry_run, pull=False)
        else:
            _print(kind, _setup(KINDS_BY_NAME[kind], settings))


def _setup(kind: QueueKind, settings: Settings) -> list[Any]:
    # The kind's setup module comes from its extra, which the settings required already.
    setup = kind.setup
    assert setup is not None

    async def work() -> list[Any]:
        http = SharedHttp()  # no container: setup needs neither the database nor a provider
        try:
            return list(await setup(settings, http))
        finally:
            await http.aclose()

    try:
        return asyncio.run(work())
    except ReminderRelayError as error:  # say what the queue's API refused
        console.print(f"[red]{kind.name} setup failed: {error}[/red]")
        raise typer.Exit(1) from None


def _print(kind: str, actions: Sequence[Any]) -> None:
    """One row per resource (``SetupAction`` or RabbitMQ's ``Declared``: kind, name, status)."""
    table = Table(title=f"setup --queue {kind}")
    for column in ("resource", "name", "result"):
        table.add_column(column)
    for action in actions:
        style = "green" if action.status == "created" else "cyan"
        table.add_row(action.kind, action.name, f"[{style}]{action.status}[/{style}]")
    console.print(table)
