"""How ``reminders dead-letters`` prints: rich tables and JSON."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi.encoders import jsonable_encoder
from rich.console import Console
from rich.table import Table

from app.cli.tables import Column, fitted_table
from app.domain.redrive import format_age
from app.services import dead_letters as service

console = Console()


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def print_json(value: Any) -> None:
    """Print a value as JSON (datetimes and dataclasses encoded like the API)."""
    console.print_json(json.dumps(jsonable_encoder(value)))


def dead_letter_table(items: list[dict[str, Any]]) -> Table:
    """Dead letters as a table that fits the terminal (least useful columns dropped first)."""
    columns = [
        Column("id"),
        Column("reminder", min_width=12),
        Column("channel"),
        Column("error class", min_width=12),
        Column("tries", justify="right"),
        Column("age", priority=1),  # ids are 64-bit: at 80 columns the age goes first
        Column("reason", min_width=18, priority=2),
        Column("send state", priority=3),
        Column("queue", min_width=10, priority=4),
        Column("redriven", min_width=10, priority=5),
    ]
    rows = [
        [
            str(item["id"]),
            item["reminder_id"] or "-",
            item["channel"] or "-",
            item["error_class"] or "-",
            str(item["attempts"]),
            format_age(item["age_seconds"]),
            item["reason"],
            item["send_state"] or "-",
            item["queue"],
            _when(item["redriven_at"]),
        ]
        for item in items
    ]
    return fitted_table("dead letters", columns, rows, width=console.width)


def send_table(title: str, items: list[dict[str, Any]], now: datetime) -> Table:
    """Send records as a table that fits the terminal."""
    columns = [
        Column("id"),
        Column("reminder", min_width=12),
        Column("channel"),
        Column("state", min_width=16, priority=2),
        Column("outcome", min_width=13),
        Column("tries", justify="right"),
        Column("error class", min_width=12, priority=1),
        Column("last error", min_width=16, priority=4),
        Column("changed", priority=3),
        Column("redrives", justify="right", priority=5),
    ]
    rows = [
        [
            str(item["id"]),
            item["reminder_id"],
            item["channel"],
            item["state"],
            item["outcome"] or "-",
            str(item["attempt_count"]),
            item["last_error_class"] or "-",
            (item["last_error"] or "-")[:60],
            format_age((now - item["updated_at"]).total_seconds()) + " ago",
            str(item["redrive_count"]),
        ]
        for item in items
    ]
    return fitted_table(title, columns, rows, width=console.width)


def report_table(report: service.RedriveReport) -> Table:
    """A redrive report (or dry run) as a table that fits the terminal."""
    verb = "would publish" if report.dry_run else "published"
    title = f"redrive{' (dry run)' if report.dry_run else ''}: {verb} {report.published}"
    columns = [
        Column("dead letter"),
        Column("reminder", min_width=12),
        Column("channel"),
        Column("action"),
        Column("reason", min_width=16),
        Column("send", priority=2),
        Column("state", priority=3),
        Column("queue / idempotency key", min_width=16, priority=1),
    ]
    rows = []
    for item in report.to_json()["items"]:
        message = item["message"]
        rows.append(
            [
                str(item["dead_letter_id"] or "-"),
                item["reminder_id"] or "-",
                item["channel"] or "-",
                item["action"],
                item["reason"],
                str(item["send_record_id"] or "-"),
                item["send_state"] or "-",
                f"{message['queue']} / {message['idempotency_key']}" if message else "-",
            ]
        )
    return fitted_table(title, columns, rows, width=console.width)
