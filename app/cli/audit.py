"""``reminders audit``: check the ledger's invariants on the configured database."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from app.cli.common import load_settings, run_in_container
from app.services.audit import audit_database

console = Console()
errors = Console(stderr=True)


def audit_command(
    repair: Annotated[
        bool,
        typer.Option(help="First settle reminders whose every channel is already final."),
    ] = False,
) -> None:
    """Check the ledger's invariants now; exit 1 naming each violation with example ids."""
    report = run_in_container(
        load_settings(),
        lambda container: audit_database(container.engine, now=container.clock(), repair=repair),
    )
    body = report.to_json()
    console.print_json(json.dumps(body))
    for invariant in body["invariants"]:
        if not invariant["holds"]:
            errors.print(
                f"[red]violated:[/red] {invariant['name']} ({invariant['description']}): "
                f"{invariant['violations']} found, e.g. {', '.join(invariant['examples'])}",
                markup=True,
                highlight=False,
            )
    if not report.ok:
        raise typer.Exit(1)
