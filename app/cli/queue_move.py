"""``reminders move-embedded``: after a queue change, move the embedded queue's waiting
messages onto the queue each channel uses now (see app/services/queue_move.py)."""

from __future__ import annotations

import json

from rich.console import Console

from app.cli.common import fail, load_settings, run_in_container
from app.container import Container
from app.services.queue_move import EMBEDDED, MoveReport, QueueChange, move_embedded_messages

console = Console()


def move_embedded_command() -> None:
    """Move the messages waiting in the embedded queue onto the queue now configured for
    their channel, each with the delay it has left (run it once after changing
    REMINDERS_QUEUE away from embedded; running it again moves what arrived since)."""
    settings = load_settings()
    kinds = settings.channel_queue_kinds
    if all(kind == EMBEDDED for kind in kinds.values()):
        fail(
            "every channel still uses the embedded queue: set REMINDERS_QUEUE (or "
            "REMINDERS_EMAIL_QUEUE_KIND / REMINDERS_WEBHOOK_QUEUE_KIND) to the new queue first"
        )

    async def work(container: Container) -> MoveReport:
        change = QueueChange(
            queue_for=container.queue_for,
            kind_for=lambda channel: kinds.get(channel, settings.queue),
            channels=container.receiver.channels,
        )
        return await move_embedded_messages(
            container.engine, container.publisher, change, clock=container.clock
        )

    report = run_in_container(settings, work)
    console.print_json(json.dumps(report.as_dict()))
