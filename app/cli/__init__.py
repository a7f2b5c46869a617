"""The ``reminders`` command: thin typer commands, one module per command group.

Commands are imported only when they run: ``reminders --help`` lists them from the table
below without importing a single command module (each one pulls in the service: FastAPI,
SQLAlchemy, the queue clients; seconds of imports on a small machine), and ``reminders
migrate`` imports only what migrating needs. ``tests/cli/test_help_and_width.py`` checks
that the table's one-line summaries are the commands' own.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup


class Entry(NamedTuple):
    """Where a command lives, and its summary for the command list."""

    module: str
    attribute: str  # a command function, or a Typer app (a group of commands)
    summary: str


# In the order a newcomer meets them: try it, run it, operate it, then the queues.
COMMANDS: dict[str, Entry] = {
    "demo": Entry(
        "demo",
        "demo_command",
        "Show every path on a fresh database: sweep, push, send, retry, dead-letter.",
    ),
    "serve": Entry(
        "server",
        "serve",
        "Serve the HTTP API with uvicorn (with the embedded queue: its dispatcher too).",
    ),
    "migrate": Entry(
        "server",
        "migrate",
        "Apply database migrations up to head (needs only REMINDERS_DATABASE_URL).",
    ),
    "sweep": Entry(
        "server",
        "sweep_command",
        "Run one sweep now (the same work as POST /cron/sweep) and print its report.",
    ),
    "import": Entry(
        "registration",
        "import_command",
        "Register customers and reminders from a JSON-lines file: one object per line with "
        'a "type" ("customer" or "reminder") and the fields of a batch item. Interrupted, '
        "it resumes where it stopped: run the same command again.",
    ),
    "dead-letters": Entry(
        "dead_letters",
        "app",
        "Inspect and redrive dead letters (the same services as /v1/dead-letters).",
    ),
    "suppressions": Entry(
        "suppressions",
        "app",
        "The addresses that receive no email (the same as /v1/suppressions).",
    ),
    "audit": Entry(
        "audit",
        "audit_command",
        "Check the ledger's invariants now; exit 1 naming each violation with example ids.",
    ),
    "purge": Entry(
        "retention",
        "purge_command",
        "Delete done and cancelled reminders (with their ledger rows) and redriven dead "
        "letters unchanged for the retention period, batch by batch, until none are left.",
    ),
    "dispatch": Entry(
        "embedded",
        "dispatch_command",
        "Run the embedded queue's dispatcher alone (SIGTERM/SIGINT stop it gracefully).",
    ),
    "embedded-dead": Entry(
        "embedded_dead", "app", "The embedded queue's dead list: messages it gave up on."
    ),
    "move-embedded": Entry(
        "queue_move",
        "move_embedded_command",
        "Move the messages waiting in the embedded queue onto the queue now configured for "
        "their channel, each with the delay it has left (run it once after changing "
        "REMINDERS_QUEUE away from embedded; running it again moves what arrived since).",
    ),
    "setup": Entry(
        "setup",
        "setup_command",
        "Create the queue resources this configuration needs (idempotent: run on every deploy).",
    ),
    "setup-infrai": Entry(
        "infrai",
        "setup_infrai_command",
        "Create the queues, DLQs, push subscriptions and sweep cron on Infrai (idempotent).",
    ),
    "check": Entry(
        "setup",
        "check_command",
        "Check the queues are set up (Infrai: also that its schemas accept our requests).",
    ),
    "worker": Entry(
        "worker",
        "worker_command",
        "Pull from the configured queues and deliver through the receiver; SIGTERM stops.",
    ),
}
ORDER = tuple(COMMANDS)


def load_command(name: str) -> Any:
    """The click command ``name``, importing its module now."""
    entry = COMMANDS[name]
    target: Any = getattr(importlib.import_module(f"app.cli.{entry.module}"), entry.attribute)
    if isinstance(target, typer.Typer):
        command: Any = typer.main.get_group(target)
    else:
        holder = typer.Typer()
        holder.command(name)(target)
        holder.callback()(lambda: None)  # a group of one, so typer keeps the name
        command = typer.main.get_group(holder).commands[name]
    command.name = name
    return command


class _LazyGroup(TyperGroup):
    """Lists ``COMMANDS`` in order; imports a command only to run it or show its help."""

    _listing = False  # while the top-level help is written: summaries, no imports

    def list_commands(self, ctx: Any) -> list[str]:
        return list(ORDER)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # typer suggests a close name from the loaded commands only: suggest from all.
        if args and args[0] not in COMMANDS and not args[0].startswith("-"):
            close = difflib.get_close_matches(args[0], ORDER, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {args[0]!r}.{hint}")
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


cli = typer.Typer(
    cls=_LazyGroup, help="reminder-relay: reminders delivered once behind a push queue."
)


@cli.callback()
def _root() -> None:
    """reminder-relay: reminders delivered once behind a push queue."""


def main() -> None:
    """Console-script entry point."""
    cli()
