"""The ``reminders`` command: thin typer commands, one module per command group."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from app.cli import server
from app.cli.audit import audit_command
from app.cli.dead_letters import app as dead_letters_app
from app.cli.demo import demo_command
from app.cli.embedded import dispatch_command
from app.cli.embedded_dead import app as embedded_dead_app
from app.cli.infrai import check_command, setup_infrai_command
from app.cli.registration import import_command
from app.cli.retention import purge_command
from app.cli.setup import setup_command
from app.cli.suppressions import app as suppressions_app
from app.cli.worker import worker_command

# The order a newcomer meets the commands in: try it, run it, operate it, then the queues.
ORDER = (
    "demo",
    "serve",
    "migrate",
    "sweep",
    "import",
    "dead-letters",
    "suppressions",
    "audit",
    "purge",
    "dispatch",
    "embedded-dead",
    "setup",
    "setup-infrai",
    "check",
    "worker",
)


class _InOrder(TyperGroup):
    """Lists commands in ``ORDER`` (click sorts by name; typer puts groups last)."""

    def list_commands(self, ctx: object) -> list[str]:
        return sorted(self.commands, key=lambda name: (*ORDER, name).index(name))


cli = typer.Typer(
    cls=_InOrder, help="reminder-relay: reminders delivered once behind a push queue."
)
cli.command("demo")(demo_command)
cli.command("serve")(server.serve)
cli.command("migrate")(server.migrate)
cli.command("sweep")(server.sweep_command)
cli.command("audit")(audit_command)
cli.add_typer(dead_letters_app, name="dead-letters")
cli.add_typer(suppressions_app, name="suppressions")
cli.command("dispatch")(dispatch_command)
cli.add_typer(embedded_dead_app, name="embedded-dead")
cli.command("setup")(setup_command)
cli.command("purge")(purge_command)
cli.command("import")(import_command)
cli.command("setup-infrai")(setup_infrai_command)
cli.command("check")(check_command)
cli.command("worker")(worker_command)


def main() -> None:
    """Console-script entry point."""
    cli()
