"""How ``reminders dead-letters`` prints: rich tables and JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi.encoders import jsonable_encoder
from rich.console import Console
from rich.table import Table

from app.domain.redrive import format_age
from app.services import dead_letters as service

console = Console()


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def print_json(value: Any) -> None:
    """Print a value as JSON (datetimes and dataclasses encoded like the API)."""
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
