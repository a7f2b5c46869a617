"""Server commands of the ``reminders`` CLI: ``migrate``, ``serve`` and ``sweep``."""

from __future__ import annotations

import json
import logging
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from app.cli.common import command_name, load_database_settings, log_to_stderr, run_in_container
from app.cli.common import load_settings as _settings
from app.cli.embedded import use_bound_address_for_pushes
from app.cli.serve_workers import MAX_DEFAULT_WORKERS, default_workers, usable_cores
from app.cli.startup import (
    look_at_database,
    migrate_or_exit,
    print_dev_banner,
    refuse_dev_mode_off_loopback,
    refuse_if_port_taken,
    refuse_unless_container_builds,
    refuse_unless_database_ready,
)
from app.db.migrations import head_revisions, upgrade_to_head
from app.observability.logs import configure_logging
from app.observability.metrics import prepare_metrics_dir
from app.observability.startup import describe_database, log_startup
from app.supervisor import ServeRun, serve_with

console = Console()
log = logging.getLogger("reminders.serve")


def migrate() -> None:
    """Apply database migrations up to head (needs only REMINDERS_DATABASE_URL)."""
    settings = load_database_settings()
    log_to_stderr()
    log_startup(command_name(), settings, look_at_database(settings.database_url))
    migrate_or_exit(settings.database_url, upgrade_to_head)
    where = describe_database(settings.database_url)
    head = ", ".join(sorted(head_revisions()))
    console.print(f"[green]schema at head[/green] ({head}) on {escape(where)}")


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Worker processes; default one per core, at most "
            f"{MAX_DEFAULT_WORKERS}, on PostgreSQL (SQLite: always 1).",
            show_default=False,
        ),
    ] = None,
    migrate_first: Annotated[
        bool | None, typer.Option("--migrate/--no-migrate", help="Migrate before serving.")
    ] = None,
) -> None:
    """Serve the HTTP API with uvicorn (with the embedded queue: its dispatcher too)."""
    settings = _settings()
    refuse_dev_mode_off_loopback(settings, host)
    refuse_if_port_taken(host, port)
    if migrate_first if migrate_first is not None else settings.dev_mode:
        migrate_or_exit(settings.database_url, upgrade_to_head)
    refuse_unless_database_ready(settings)
    refuse_unless_container_builds(settings)
    if settings.dev_mode:
        print_dev_banner(console, settings, host, port)
    if workers is None:
        workers = default_workers(is_sqlite=settings.is_sqlite, cores=usable_cores())
    elif settings.is_sqlite and workers > 1:
        console.print("[yellow]SQLite: one worker only (writes are serialized)[/yellow]")
        workers = 1
    use_bound_address_for_pushes(host, port)
    configure_logging(settings.log_level, log_format=settings.log_format)
    log.info("serving with %d worker process%s", workers, "es" if workers > 1 else "")
    prepare_metrics_dir(workers)
    serve_with(
        ServeRun(
            host=host,
            port=port,
            workers=workers,
            healthcheck_seconds=settings.worker_healthcheck_seconds,
            log_level=settings.log_level,
            log_format=settings.log_format,
        )
    )


def sweep_command() -> None:
    """Run one sweep now (the same work as POST /cron/sweep) and print its report."""
    report = run_in_container(_settings(), lambda container: container.sweep())
    console.print_json(json.dumps(report.to_json()))
    if report.error:
        raise typer.Exit(1)
