"""``reminders dead-letters list|show|redrive|stuck``: the console, on the same services as the API.

Each command is one unit of work against the database named by the settings; it does not
go through the HTTP API. A real redrive needs a queue this process can publish to: with
``REMINDERS_QUEUE=memory`` the queue lives inside the server process, so only
``--dry-run`` is allowed here (use the API or the admin page instead).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from fastapi.encoders import jsonable_encoder
from rich.console import Console
from rich.table import Table

from app.adapters.queues.registry import close_publisher
from app.api.deps import Container
from app.cli_common import load_settings as _settings
from app.domain.errors import ReminderRelayError
from app.domain.redrive import DeadLetterFilter, SendFilter, format_age, parse_duration
from app.domain.states import SendState
from app.services import dead_letters as service
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


def open_container(settings: Settings, *, publish: bool) -> Container:
    """The service's wiring for one command; refuses a real redrive into a private memory queue."""
    from app.main import build_container

    if publish and settings.queue == "memory":
        raise MemoryQueueRefused(
            "REMINDERS_QUEUE=memory: a message published here would vanish with this process; "
            "use --dry-run, POST /v1/dead-letters/.../redrive, or the /admin page"
        )
    return build_container(settings)


def _run(work: Callable[[Container], Awaitable[T]], *, publish: bool = False) -> T:
    async def main() -> T:
        container = open_container(_settings(), publish=publish)
        try:
            return await work(container)
        finally:
            await close_publisher(container.publisher)
            await container.engine.dispose()

    try:
        return asyncio.run(main())
    except ReminderRelayError as error:
        console.print(f"[red]{type(error).__name__}:[/red] {error}")
        raise typer.Exit(2) from None


def _filter(
    queue: str | None,
    channel: str | None,
    error_class: str | None,
    reason: str | None,
    reminder: str | None,
    older_than: str | None,
    newer_than: str | None,
    redriven: bool | None = False,
) -> DeadLetterFilter:
    try:
        older = parse_duration(older_than) if older_than else None
        newer = parse_duration(newer_than) if newer_than else None
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    return DeadLetterFilter(queue, channel, error_class, reason, reminder, older, newer, redriven)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _print_json(value: Any) -> None:
    console.print_json(json.dumps(jsonable_encoder(value)))


def dead_letter_table(items: list[dict[str, Any]]) -> Table:
    """Dead letters as a rich table."""
    table = Table(title="dead letters")
    for name in ("id", "queue", "reminder", "channel", "reason", "error class", "attempts"):
        table.add_column(name)
    for name in ("age", "send state", "redriven"):
        table.add_column(name)
    for item in items:
        table.add_row(
            str(item["id"]),
            item["queue"],
            item["reminder_id"] or "-",
            item["channel"] or "-",
            item["reason"],
            item["error_class"] or "-",
            str(item["attempts"]),
            format_age(item["age_seconds"]),
            item["send_state"] or "-",
            _when(item["redriven_at"]),
        )
    return table


def send_table(title: str, items: list[dict[str, Any]], now: datetime) -> Table:
    """Send records as a rich table."""
    table = Table(title=title)
    for name in ("id", "reminder", "channel", "state", "outcome", "attempts", "redrives"):
        table.add_column(name)
    for name in ("error class", "last error", "changed"):
        table.add_column(name)
    for item in items:
        table.add_row(
            str(item["id"]),
            item["reminder_id"],
            item["channel"],
            item["state"],
            item["outcome"] or "-",
            str(item["attempt_count"]),
            str(item["redrive_count"]),
            item["last_error_class"] or "-",
            (item["last_error"] or "-")[:60],
            format_age((now - item["updated_at"]).total_seconds()) + " ago",
        )
    return table


def report_table(report: service.RedriveReport) -> Table:
    """A redrive report (or dry run) as a rich table."""
    verb = "would publish" if report.dry_run else "published"
    table = Table(
        title=f"redrive{' (dry run)' if report.dry_run else ''}: {verb} {report.published}"
    )
    for name in ("dead letter", "send", "reminder", "channel", "state", "action", "reason"):
        table.add_column(name)
    table.add_column("queue / idempotency key")
    for item in report.to_json()["items"]:
        message = item["message"]
        table.add_row(
            str(item["dead_letter_id"] or "-"),
            str(item["send_record_id"] or "-"),
            item["reminder_id"] or "-",
            item["channel"] or "-",
            item["send_state"] or "-",
            item["action"],
            item["reason"],
            f"{message['queue']} / {message['idempotency_key']}" if message else "-",
        )
    return table


@app.command("list")
def list_command(
    queue: Queue = None,
    channel: Channel = None,
    error_class: ErrorClass = None,
    reason: Reason = None,
    reminder: Reminder = None,
    older_than: OlderThan = None,
    newer_than: NewerThan = None,
    status: Annotated[str, typer.Option(help="open, redriven or all.")] = "open",
    terminal: Annotated[
        bool, typer.Option("--terminal", help="Also list terminal failures (redrivable).")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_PAGE)] = 50,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of a previous page.")] = None,
    as_json: AsJson = False,
) -> None:
    """List dead letters (open ones by default), oldest first."""
    if status not in ("open", "redriven", "all"):
        raise typer.BadParameter("--status must be open, redriven or all")
    redriven = {"open": False, "redriven": True, "all": None}[status]
    filters = _filter(
        queue, channel, error_class, reason, reminder, older_than, newer_than, redriven
    )

    async def work(container: Container) -> dict[str, Any]:
        now = container.clock()
        async with container.engine.connect() as conn:
            page = await service.list_dead_letters(
                conn, filters, now=now, cursor=cursor, limit=limit
            )
            sends = None
            if terminal:
                state = SendFilter(state=SendState.TERMINAL_FAILURE, channel=channel)
                sends = await service.list_sends(conn, state, now=now, limit=limit)
        return {"now": now, "page": page, "terminal": sends}

    result = _run(work)
    page, sends = result["page"], result["terminal"]
    if as_json:
        body = {"items": page.items, "next_cursor": page.next_cursor}
        _print_json(body | ({"terminal_failures": sends.items} if sends else {}))
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
        _print_json(shown)
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
    """List sends stuck in ``sending`` past their lease."""

    async def work(container: Container) -> tuple[datetime, service.Page]:
        now = container.clock()
        async with container.engine.connect() as conn:
            filters = SendFilter(stuck=True)
            return now, await service.list_sends(conn, filters, now=now, limit=limit)

    now, page = _run(work)
    if as_json:
        _print_json({"items": page.items, "next_cursor": page.next_cursor})
    else:
        console.print(send_table("sends stuck past their lease", page.items, now))


@app.command("redrive")
def redrive_command(
    dead_letter_id: Annotated[int | None, typer.Argument(help="One dead letter.")] = None,
    send: Annotated[int | None, typer.Option("--send", help="One send record instead.")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be published; change nothing.")
    ] = False,
    every: Annotated[
        bool, typer.Option("--all", help="With no filter: every open dead letter.")
    ] = False,
    queue: Queue = None,
    channel: Channel = None,
    error_class: ErrorClass = None,
    reason: Reason = None,
    reminder: Reminder = None,
    older_than: OlderThan = None,
    newer_than: NewerThan = None,
    limit: Annotated[int, typer.Option(min=1, max=service.MAX_REDRIVE_BATCH)] = 100,
    as_json: AsJson = False,
) -> None:
    """Redrive one dead letter, one send record, or every open dead letter matching filters."""
    filters = _filter(queue, channel, error_class, reason, reminder, older_than, newer_than)
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
        _print_json(report.to_json())
    else:
        console.print(report_table(report))
    if report.error:
        console.print(f"[red]queue refused:[/red] {report.error}")
        raise typer.Exit(1)
