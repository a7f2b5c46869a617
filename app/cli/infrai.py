"""Infrai commands of the ``reminders`` CLI: ``check``, ``setup-infrai``.

Thin: each builds what it needs from settings, runs one service, prints, and exits
non-zero on failure. Registered on the main Typer app in ``app/cli/__init__.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from app.adapters.queues.infrai.api import InfraiApi
from app.adapters.queues.infrai.check import passed, run_check
from app.adapters.queues.infrai.discovery import (
    CheckResult,
    Discovery,
    FileDiscovery,
    HttpDiscovery,
)
from app.adapters.queues.infrai.publisher import build_http_client, infrai_config
from app.adapters.queues.infrai.setup import SetupResult, apply_setup, plan_setup
from app.adapters.queues.kinds import QUEUE_KINDS
from app.cli.common import load_settings as _settings
from app.cli.common import run_in_container
from app.container import Container
from app.domain.errors import ReminderRelayError
from app.settings import Settings

console = Console()
_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "created": "green",
    "subscribed": "green",
    "exists": "cyan",
    "would call": "cyan",
    "differs": "yellow",
    "failed": "red",
}


def _api(container: Container) -> InfraiApi:
    """An Infrai API client, closed with the container."""
    infrai = container.settings.infrai
    api = InfraiApi(build_http_client(infrai), infrai_config(infrai))
    container.close_with(api.client.aclose)
    return api


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
    settings = _settings()
    # Kinds with a check of their own; Infrai's is this command's (a discovery file, --pull).
    in_use = settings.queue_kinds_in_use
    checks = [k.check for k in QUEUE_KINDS if k.check is not None and k.name in in_use]
    infrai = "infrai" in in_use or not checks

    async def run(container: Container) -> list[CheckResult]:
        http = container.http
        assert http is not None  # open_container always builds the shared pool
        results = [r for check in checks for r in await check(settings, http)]
        if not infrai:
            return results
        api = _api(container)
        discovery: Discovery = (
            FileDiscovery(discovery_file) if discovery_file else HttpDiscovery(api)
        )
        return results + await run_check(
            discovery, api, settings, push=not pull, skip_queues=skip_queues
        )

    results = run_in_container(settings, run)
    table = Table(title=f"Infrai check ({settings.infrai.base_url})" if infrai else "check")
    for column in ("check", "result", "detail"):
        table.add_column(column, overflow="fold")
    for result in results:
        style = _STYLE[result.status]
        table.add_row(result.check, f"[{style}]{result.status.upper()}[/{style}]", result.detail)
    console.print(table)
    if not passed(results):
        console.print("[red]check failed[/red]")
        raise typer.Exit(1)
    console.print("[green]check passed[/green]")


def setup_infrai_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls; make none.")] = False,
    pull: Annotated[
        bool, typer.Option("--pull", help="Pull deployment: no push subscriptions.")
    ] = False,
) -> None:
    """Create the queues, DLQs, push subscriptions and sweep cron on Infrai (idempotent)."""
    settings = _settings()
    try:
        steps = plan_setup(settings, push=not pull)
    except ReminderRelayError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from None
    if dry_run:
        results = [SetupResult(step, "would call") for step in steps]
    else:
        results = run_in_container(settings, lambda container: _apply(container, steps))
    _print_setup(settings, results, dry_run=dry_run)
    if any(result.status == "failed" for result in results):
        raise typer.Exit(1)


async def _apply(container: Container, steps: list) -> list[SetupResult]:
    api = _api(container)
    try:
        return await apply_setup(
            api, steps, queue_list_path=container.settings.infrai.queue_list_path
        )
    except ReminderRelayError as error:
        console.print(f"[red]{error}[/red]")
        raise typer.Exit(1) from None


def _print_setup(settings: Settings, results: list[SetupResult], *, dry_run: bool) -> None:
    base = settings.infrai.base_url.rstrip("/")
    table = Table(title="setup-infrai (dry run: no call made)" if dry_run else "setup-infrai")
    for column in ("step", "target", "result", "call"):
        table.add_column(column, overflow="fold")
    for result in results:
        step, style = result.step, _STYLE[result.status]
        call = f"{step.method} {base}{step.path}"
        if dry_run:
            call += " " + json.dumps(step.shown(), sort_keys=True)
        elif result.detail:
            call += f"\n{result.detail}"
        table.add_row(step.kind, step.target, f"[{style}]{result.status}[/{style}]", call)
    console.print(table)
