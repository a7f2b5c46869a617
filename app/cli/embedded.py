"""Embedded-queue command of the ``reminders`` CLI: ``dispatch`` (and serve's push address).

Thin: builds what it needs from settings, runs one service, prints, and exits non-zero on
failure. Registered on the main Typer app in ``app/cli/__init__.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from typing import Annotated

import typer
from rich.console import Console

from app.adapters.queues.embedded.configured import dispatcher_from_settings
from app.adapters.queues.embedded.dispatcher import DispatchReport
from app.cli.common import command_container
from app.cli.common import load_settings as _settings
from app.settings import Settings

console = Console()


def local_base_url(host: str, port: int) -> str:
    """The loopback URL of a server bound to ``host:port`` (wildcards become loopback)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def use_bound_address_for_pushes(host: str, port: int) -> None:
    """``reminders serve``: the in-process dispatcher pushes to this very server by default."""
    os.environ.setdefault("REMINDERS_EMBEDDED_PUSH_BASE_URL", local_base_url(host, port))


def dispatch_command(
    once: Annotated[
        bool, typer.Option("--once", help="Deliver what is due now, print a report, exit.")
    ] = False,
    concurrency: Annotated[
        int | None, typer.Option(help="Concurrent pushes (REMINDERS_EMBEDDED_CONCURRENCY).")
    ] = None,
) -> None:
    """Run the embedded queue's dispatcher alone (SIGTERM/SIGINT stop it gracefully)."""
    settings = _settings()
    if "embedded" not in settings.queue_kinds_in_use:
        console.print(f"[red]REMINDERS_QUEUE={settings.queue}: nothing to dispatch[/red]")
        raise typer.Exit(2)
    if concurrency is not None:
        embedded = settings.embedded.model_copy(update={"concurrency": max(1, concurrency)})
        settings = settings.model_copy(update={"embedded": embedded})
    report = asyncio.run(_dispatch(settings, once=once))
    console.print_json(
        json.dumps(
            {
                "claimed": report.claimed,
                "acknowledged": report.acknowledged,
                "redelivering": report.redelivering,
                "dead": report.dead,
                "expired": report.expired,
                "outcomes": dict(report.outcomes),
            }
        )
    )


async def _dispatch(settings: Settings, *, once: bool) -> DispatchReport:
    async with command_container(settings) as container:
        dispatcher, pusher = dispatcher_from_settings(
            settings, container.engine, clock=container.clock, rand=container.receiver.rand
        )
        if pusher is not None:
            container.close_with(pusher.close)
        if once:
            total = DispatchReport()
            while (report := await dispatcher.run_once()).claimed:
                total.add(report)
            total.add(report)
            return total
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        logging.getLogger("reminders.embedded_queue").info(
            "dispatching to %s, %d at a time", dispatcher.target.base_url,
            settings.embedded.concurrency,
        )  # fmt: skip
        return await dispatcher.run(stop, poll_interval=settings.embedded.poll_interval_seconds)
