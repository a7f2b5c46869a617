"""``reminders embedded-dead``: the embedded queue's dead list (``list``, ``redrive``).

The same service as ``GET /v1/queues/embedded/dead`` and its redrive route: one unit of
work per command, printed as JSON for scripts.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from fastapi.encoders import jsonable_encoder
from rich.console import Console

from app.cli.common import load_settings, run_in_container
from app.container import Container
from app.services import embedded_dead as service

app = typer.Typer(help="The embedded queue's dead list: messages it gave up on.")
console = Console()


@app.command("list")
def list_command(
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_PAGE)] = 50,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of a previous page")] = None,
) -> None:
    """Print one page of dead messages (oldest last delivery first) and the next cursor."""

    async def work(container: Container) -> service.DeadPage:
        async with container.engine.connect() as conn:
            return await service.list_dead_messages(conn, cursor=cursor, limit=limit)

    page = run_in_container(load_settings(), work)
    body = {"items": page.items, "next_cursor": page.next_cursor}
    console.print_json(json.dumps(jsonable_encoder(body)))


@app.command("redrive")
def redrive_command(
    message_ids: Annotated[list[str], typer.Argument(help="message ids from `list`")],
) -> None:
    """Put dead messages back in the queue (ready now, with a fresh redelivery budget)."""

    async def work(container: Container) -> list[str]:
        async with container.engine.begin() as conn:
            return await service.redrive_dead_messages(conn, message_ids, now=container.clock())

    moved = run_in_container(load_settings(), work)
    console.print_json(json.dumps({"redriven": moved, "count": len(moved)}))
    if len(moved) < len(message_ids):
        raise typer.Exit(1)  # some ids were not in the dead list
