"""Infrai commands of the ``reminders`` CLI: ``worker``, ``check``, ``setup-infrai``.

Thin: each builds what it needs from settings, runs one service, prints, and exits
non-zero on failure. Registered on the main Typer app in ``app/cli/__init__.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from app.adapters.queues.infrai import (
    InfraiApi,
    build_http_client,
    build_infrai_consumer,
    infrai_config,
)
from app.adapters.queues.infrai.check import passed, run_check
from app.adapters.queues.infrai.discovery import (
    CheckResult,
    Discovery,
    FileDiscovery,
    HttpDiscovery,
)
from app.adapters.queues.infrai.setup import SetupResult, apply_setup, plan_setup
from app.cli.common import load_settings as _settings
from app.cli.common import run_in_container
from app.container import Container, open_container
from app.domain.errors import ReminderRelayError
from app.domain.retry import BackoffPolicy
from app.services.pull_worker import PullWorkerConfig, WorkerStats, run_pull_worker
from app.settings import Settings
from app.settings.google import GOOGLE_KINDS

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


def worker_command(
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue", "-q", help="Queue to consume (repeatable). Default: every channel's."
        ),
    ] = None,
) -> None:
    """Pull from Infrai and deliver through the receiver (for private networks); SIGTERM stops."""
    settings = _settings()
    if not settings.infrai.api_key.get_secret_value():
        console.print("[red]REMINDERS_INFRAI_API_KEY is not set[/red]")
        raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    queues = tuple(queue or sorted(set(settings.channel_queues.values())))
    stats = asyncio.run(_run_worker(settings, queues))
    console.print(
        f"worker stopped: {stats.deliveries} deliveries, {stats.acked} acked, "
        f"{stats.nacked} nacked, {stats.left_to_expire} left to expire, {stats.errors} errors"
    )


async def _run_worker(settings: Settings, queues: tuple[str, ...]) -> WorkerStats:
    infrai = settings.infrai
    config = PullWorkerConfig(
        queues=queues,
        max_messages=infrai.worker_max_messages,
        visibility_timeout=infrai.visibility_timeout(settings.lease_seconds),
        idle_backoff=BackoffPolicy(
            infrai.worker_idle_min_seconds,
            infrai.worker_idle_max_seconds,
            infrai.worker_idle_min_seconds,
        ),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    console.print(
        f"worker consuming {', '.join(queues)} (visibility {config.visibility_timeout} s)"
    )
    async with open_container(settings) as container:
        api = _api(container)
        return await run_pull_worker(
            container.receiver,
            build_infrai_consumer(api, infrai),
            config,
            stop=stop,
            rand=container.receiver.rand,
        )


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
    google = [kind for kind in GOOGLE_KINDS if kind in settings.queue_kinds_in_use]
    infrai = "infrai" in settings.queue_kinds_in_use or not google

    async def run(container: Container) -> list[CheckResult]:
        if google:  # the [gcp] extra, which the settings required for these kinds
            from app.adapters.queues.google_check import check_google
        http = container.http
        assert http is not None  # open_container always builds the shared pool
        results = [r for kind in google for r in await check_google(kind, settings, http)]
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
