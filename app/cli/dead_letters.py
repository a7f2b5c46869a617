"""``reminders dead-letters list|show|redrive|discard|stuck``: the console, on the services
the API uses.

Each command is one unit of work against the database named by the settings; it does not
go through the HTTP API. A real redrive needs a queue this process can publish to: with
``REMINDERS_QUEUE=memory`` the queue lives inside the server process, so only
``--dry-run`` is allowed here (use the API or the admin page instead).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from app.cli.common import command_container
from app.cli.common import load_settings as _settings
from app.cli.dead_letters_tables import dead_letter_table, print_json, report_table, send_table
from app.container import Container
from app.domain.errors import ReminderRelayError
from app.domain.redrive import DeadLetterFilter, SendFilter, parse_duration
from app.domain.states import SendState
from app.services import dead_letters as service
from app.services import discard
from app.settings import Settings

app = typer.Typer(help="Inspect and redrive dead letters (the same services as /v1/dead-letters).")
console = Console()
T = TypeVar("T")

Queue = Annotated[str | None, typer.Option(help="Only this queue.")]
Channel = Annotated[str | None, typer.Option(help="Only this channel (email, webhook).")]
ErrorClass = Annotated[str | None, typer.Option("--error-class", help="e.g. smtp_4xx, timeout.")]
Reason = Annotated[
    str | None, typer.Option(help="attempts_exhausted, malformed or unknown_reminder.")
]
Reminder = Annotated[str | None, typer.Option("--reminder", help="Only this reminder id.")]
OlderThan = Annotated[str | None, typer.Option("--older-than", help="e.g. 30m, 2h, 3d.")]
NewerThan = Annotated[str | None, typer.Option("--newer-than", help="e.g. 30m, 2h, 3d.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


class MemoryQueueRefused(ReminderRelayError):
    """The in-memory queue lives inside the server process: publish through the API instead."""


@asynccontextmanager
async def open_container(settings: Settings, *, publish: bool) -> AsyncIterator[Container]:
    """The service's objects for one command; refuses a real redrive into a memory queue."""
    if publish and "memory" in settings.queue_kinds_in_use:
        raise MemoryQueueRefused(
            "REMINDERS_QUEUE=memory: a message published here would vanish with this process; "
            "use --dry-run, POST /v1/dead-letters/.../redrive, or the /admin page"
        )
    async with command_container(settings) as container:
        yield container


def _run(work: Callable[[Container], Awaitable[T]], *, publish: bool = False) -> T:
    async def main() -> T:
        async with open_container(_settings(), publish=publish) as container:
            return await work(container)

    try:
        return asyncio.run(main())
    except ReminderRelayError as error:
        console.print(f"[red]{type(error).__name__}:[/red] {error}")
        raise typer.Exit(2) from None


# The filter options ``list`` and ``redrive`` share, defined once: ``with_filters`` puts
# them where a command declares ``filters: DeadLetterFilter``.
_FILTER_OPTIONS = tuple(
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
    for name, option in (
        ("queue", Queue),
        ("channel", Channel),
        ("error_class", ErrorClass),
        ("reason", Reason),
        ("reminder", Reminder),
        ("older_than", OlderThan),
        ("newer_than", NewerThan),
    )
)


def with_filters(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the shared filter options in place of its ``filters`` parameter."""
    signature = inspect.signature(command, eval_str=True)
    parameters = [
        replacement
        for parameter in signature.parameters.values()
        for replacement in (
            _FILTER_OPTIONS
            if parameter.name == "filters"
            else (parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY),)
        )
    ]

    @functools.wraps(command)
    def wrapper(**options: Any) -> None:
        values = {option.name: options.pop(option.name) for option in _FILTER_OPTIONS}
        return command(filters=_filter(**values), **options)

    # Typer reads the options from the signature and the annotations (not ``__wrapped__``).
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return wrapper


def _filter(
    queue: str | None,
    channel: str | None,
    error_class: str | None,
    reason: str | None,
    reminder: str | None,
    older_than: str | None,
    newer_than: str | None,
) -> DeadLetterFilter:
    try:
        older = parse_duration(older_than) if older_than else None
        newer = parse_duration(newer_than) if newer_than else None
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return DeadLetterFilter(queue, channel, error_class, reason, reminder, older, newer)


@app.command("list")
@with_filters
def list_command(
    filters: DeadLetterFilter,
    status: Annotated[str, typer.Option(help="open, redriven, discarded or all.")] = "open",
    terminal: Annotated[
        bool, typer.Option("--terminal", help="Also list terminal failures (redrivable).")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_PAGE)] = 50,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of a previous page.")] = None,
    as_json: AsJson = False,
) -> None:
    """List dead letters (open ones by default), oldest first."""
    if status not in ("open", "redriven", "discarded", "all"):
        raise typer.BadParameter("--status must be open, redriven, discarded or all")
    redriven = {"open": False, "redriven": True}.get(status)
    filters = dataclasses.replace(filters, redriven=redriven, discarded=status == "discarded")

    async def work(container: Container) -> dict[str, Any]:
        now = container.clock()
        async with container.engine.connect() as conn:
            page = await service.list_dead_letters(
                conn, filters, now=now, cursor=cursor, limit=limit
            )
            sends = None
            if terminal:
                state = SendFilter(state=SendState.TERMINAL_FAILURE, channel=filters.channel)
                sends = await service.list_sends(conn, state, now=now, limit=limit)
        return {"now": now, "page": page, "terminal": sends}

    result = _run(work)
    page, sends = result["page"], result["terminal"]
    if as_json:
        body = {"items": page.items, "next_cursor": page.next_cursor}
        print_json(body | ({"terminal_failures": sends.items} if sends else {}))
        return
    console.print(dead_letter_table(page.items))
    if page.next_cursor:
        console.print(f"more: --cursor {page.next_cursor}")
    if sends is not None:
        console.print(send_table("terminal failures", sends.items, result["now"]))


@app.command("show")
def show_command(dead_letter_id: int, as_json: AsJson = False) -> None:
    """Show one dead letter, its send record, its ledger history and the redrive preview."""

    async def work(container: Container) -> tuple[datetime, dict[str, Any]]:
        now = container.clock()
        async with container.engine.connect() as conn:
            return now, await service.show_dead_letter(
                conn, dead_letter_id, now=now, queue_for=container.queue_for
            )

    now, shown = _run(work)
    if as_json:
        print_json(shown)
        return
    letter, record = shown["dead_letter"], shown["send_record"]
    console.print(dead_letter_table([letter]))
    console.print(f"[bold]error:[/bold] {letter['error'] or '-'}")
    if record:
        console.print(send_table("send record", [record], now))
    console.print(
        dead_letter_table(
            [{**h, "age_seconds": None, "send_state": None} for h in shown["history"]]
        )
    )
    preview = shown["redrive"]
    console.print(f"[bold]redrive:[/bold] {preview['action']}: {preview['reason']}")


@app.command("stuck")
def stuck_command(
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_PAGE)] = 50,
    as_json: AsJson = False,
) -> None:
    """List sends stuck in state "sending" past their lease."""

    async def work(container: Container) -> tuple[datetime, service.Page]:
        now = container.clock()
        async with container.engine.connect() as conn:
            filters = SendFilter(stuck=True)
            return now, await service.list_sends(conn, filters, now=now, limit=limit)

    now, page = _run(work)
    if as_json:
        print_json({"items": page.items, "next_cursor": page.next_cursor})
    else:
        console.print(send_table("sends stuck past their lease", page.items, now))


@app.command("redrive")
@with_filters
def redrive_command(
    dead_letter_id: Annotated[int | None, typer.Argument(help="One dead letter.")] = None,
    send: Annotated[int | None, typer.Option("--send", help="One send record instead.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be published; change nothing.")
    ] = False,
    every: Annotated[
        bool, typer.Option("--all", help="With no filter: every open dead letter.")
    ] = False,
    filters: DeadLetterFilter = DeadLetterFilter(),
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_REDRIVE_BATCH)] = 100,
    as_json: AsJson = False,
) -> None:
    """Redrive one dead letter, one send record, or every open dead letter matching filters."""
    by_filter = dead_letter_id is None and send is None
    if by_filter and filters == DeadLetterFilter() and not every:
        raise typer.BadParameter("name a dead letter, --send ID, a filter, or --all")

    async def work(container: Container) -> service.RedriveReport:
        ctx = service.RedriveContext(
            container.engine, container.publisher, container.queue_for, container.clock
        )
        if dead_letter_id is not None:
            return await service.redrive_dead_letter(ctx, dead_letter_id, dry_run=dry_run)
        if send is not None:
            return await service.redrive_send(ctx, send, dry_run=dry_run)
        return await service.redrive_dead_letters(ctx, filters, dry_run=dry_run, limit=limit)

    report = _run(work, publish=not dry_run)
    if as_json:
        print_json(report.to_json())
    else:
        console.print(report_table(report))
    if report.error:
        console.print(f"[red]queue refused:[/red] {report.error}")
        raise typer.Exit(1)


@app.command("discard")
def discard_command(
    dead_letter_ids: Annotated[list[int], typer.Argument(help="Quarantined dead letter ids.")],
    as_json: AsJson = False,
) -> None:
    """Close quarantined dead letters no redrive can publish (gone from the open set)."""

    async def work(container: Container) -> list[discard.DiscardItem]:
        async with container.engine.begin() as conn:
            return await discard.discard_dead_letters(conn, dead_letter_ids, now=container.clock())

    items = _run(work)
    if as_json:
        print_json({"items": [item.to_json() for item in items]})
    else:
        for item in items:
            mark = "[green]discarded[/green]" if item.discarded else f"kept: {item.reason}"
            console.print(f"dead letter {item.dead_letter_id}: {mark}")
    if not all(item.discarded for item in items):
        raise typer.Exit(1)
