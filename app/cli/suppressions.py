"""``reminders suppressions list|add|lift``: the suppression list, on the services the API
uses (``/v1/suppressions``). Each command is one transaction against the database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.ext.asyncio import AsyncConnection

from app.cli.common import command_container, load_settings
from app.cli.dead_letters_tables import print_json
from app.domain.errors import ReminderRelayError
from app.domain.suppression import SuppressionReason
from app.services import suppressions as service

app = typer.Typer(help="The addresses that receive no email (the same as /v1/suppressions).")
console = Console()
T = TypeVar("T")

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _run(work: Callable[[AsyncConnection, Any], Awaitable[T]]) -> T:
    async def main() -> T:
        async with (
            command_container(load_settings()) as container,
            container.engine.begin() as conn,
        ):
            return await work(conn, container.clock())

    try:
        return asyncio.run(main())
    except ReminderRelayError as error:
        console.print(f"[red]{type(error).__name__}:[/red] {error}")
        raise typer.Exit(2) from None


def _table(rows: list[dict[str, Any]]) -> Table:
    table = Table("email", "reason", "source", "since", "detail")
    for row in rows:
        since = row["created_at"].isoformat(timespec="seconds")
        table.add_row(row["email"], row["reason"], row["source"], since, row["detail"] or "")
    return table


@app.command("list")
def list_command(
    email: Annotated[str | None, typer.Option(help="Only this address.")] = None,
    domain: Annotated[str | None, typer.Option(help="Only addresses at this domain.")] = None,
    reason: Annotated[SuppressionReason | None, typer.Option(help="Only this reason.")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_LIMIT)] = 50,
    as_json: AsJson = False,
) -> None:
    """List suppressed addresses in address order."""
    filters = service.SuppressionFilters(email=email, domain=domain, reason=reason)
    page = _run(
        lambda conn, _now: service.list_suppressions(conn, filters, cursor=cursor, limit=limit)
    )
    if as_json:
        print_json({"items": page.items, "next_cursor": page.next_cursor})
        return
    console.print(_table(page.items))
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")


@app.command("add")
def add_command(
    email: Annotated[str, typer.Argument(help="The address to suppress.")],
    detail: Annotated[str | None, typer.Option(help="Why, for the record.")] = None,
) -> None:
    """Suppress an address by hand (reason manual)."""
    row = _run(
        lambda conn, now: service.suppress_by_hand(
            conn, email, source="cli", detail=detail, now=now
        )
    )
    console.print(_table([row]))


@app.command("lift")
def lift_command(
    email: Annotated[str, typer.Argument(help="The address to take off the list.")],
    force: Annotated[bool, typer.Option("--force", help="Required to lift a complaint.")] = False,
) -> None:
    """Take an address off the list (a complaint only with --force)."""
    row = _run(lambda conn, _now: service.lift_suppression(conn, email, force=force))
    console.print(f"lifted {row['email']} ({row['reason']})")
