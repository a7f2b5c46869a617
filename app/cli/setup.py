"""``reminders setup --queue KIND``: create what a queue kind needs, idempotently.

``infrai`` is ``setup-infrai``; ``pubsub`` creates topics, dead-letter topics and push
subscriptions; ``cloudtasks`` creates queues with their retry configuration. Without
``--queue``, every kind the configuration uses that has something to set up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.adapters.queues.pubsub.api import PubSubApiError
from app.adapters.queues.pubsub.setup import SetupAction
from app.cli.common import load_settings, run_in_container
from app.cli.infrai import setup_infrai_command
from app.container import Container
from app.settings import Settings
from app.settings.google import GOOGLE_KINDS

console = Console()
SETUP_KINDS = ("infrai", *GOOGLE_KINDS, "rabbitmq", "sqs")


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
        elif kind == "rabbitmq":
            _print(kind, _rabbitmq(settings))
        elif kind == "sqs":
            _print(kind, _sqs(settings))
        else:
            _print(kind, _google(kind, settings))


def _google(kind: str, settings: Settings) -> list[SetupAction]:
    # Imported here: the Google libraries come from the [gcp] extra, which the settings
    # already required when a Google queue is configured.
    from google.api_core.exceptions import GoogleAPIError

    from app.adapters.queues.google import run_google_setup

    async def work(container: Container) -> list[SetupAction]:
        assert container.http is not None  # open_container always builds the shared pool
        return await run_google_setup(kind, settings, container.http)

    try:
        return run_in_container(settings, work)
    except (PubSubApiError, GoogleAPIError) as error:  # say what the API refused
        console.print(f"[red]{kind} setup failed: {error}[/red]")
        raise typer.Exit(1) from None


def _rabbitmq(settings: Settings) -> list[Any]:
    # aio-pika comes from the [rabbitmq] extra, which the settings required already.
    from app.adapters.queues.rabbitmq.setup import declare_topology
    from app.domain.errors import ReminderRelayError

    queues = sorted(q for q, kind in settings.queue_kinds.items() if kind == "rabbitmq")
    rabbit = settings.rabbitmq
    try:
        declared = asyncio.run(
            declare_topology(
                rabbit.url.get_secret_value(),
                queues,
                delivery_limit=rabbit.delivery_limit,
                max_delay_seconds=rabbit.max_delay_seconds,
                timeout=rabbit.connect_timeout_seconds,
            )
        )
    except ReminderRelayError as error:
        console.print(f"[red]rabbitmq setup failed: {error}[/red]")
        raise typer.Exit(1) from None
    return list(declared)


def _sqs(settings: Settings) -> list[Any]:
    # aiobotocore comes from the [aws] extra, which the settings required already.
    from app.adapters.queues.sqs import sqs_client
    from app.adapters.queues.sqs.setup import create_queues
    from app.domain.errors import ReminderRelayError

    queues = sorted(q for q, kind in settings.queue_kinds.items() if kind == "sqs")

    async def work() -> list[Any]:
        client = sqs_client(settings)
        try:
            return list(
                await create_queues(
                    client, queues, max_receive_count=settings.sqs.max_receive_count
                )
            )
        finally:
            await client.aclose()

    try:
        return asyncio.run(work())
    except ReminderRelayError as error:
        console.print(f"[red]sqs setup failed: {error}[/red]")
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
