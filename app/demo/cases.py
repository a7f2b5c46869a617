"""The demo's cases and steps, what it reports, and the outcomes it must end with."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Case:
    """One path through the system, and the reminder that takes it."""

    reminder_id: str
    path: str
    due_in: timedelta
    expect: str  # the ledger outcome every channel of it must end with
    channels: tuple[str, ...] = ("email",)
    webhook: str | None = None  # the endpoint behaviour its webhook_url points at


NOW, HOUR, DAY, HOOK = timedelta(0), timedelta(hours=1), timedelta(days=1), ("webhook",)
CASES = (
    Case("demo:due-now", "due now: email + webhook", NOW, "sent", ("email", "webhook"), "ok"),
    Case("demo:in-6-days", "due in 6 days: enqueued with a delay", 6 * DAY, "sent"),
    Case("demo:in-8-days", "due in 8 days: waits in the database", 8 * DAY, "sent"),
    Case("demo:cancelled", "cancelled while queued", HOUR, "cancelled"),
    Case("demo:rescheduled", "rescheduled while queued: +1 h → +3 h", HOUR, "sent"),
    Case("demo:unsubscribed", "unsubscribed while queued", HOUR, "suppressed"),
    Case("demo:permanent", "webhook says 400: permanent", NOW, "terminal", HOOK, "reject"),
    Case("demo:transient", "webhook says 503, then 200", NOW, "sent", HOOK, "flaky"),
    Case("demo:down", "webhook always 503: exhausted", NOW, "dead_lettered", HOOK, "down"),
    Case("demo:pushed-twice", "dispatcher died after a push", NOW, "sent"),
)  # fmt: skip

STEPS = (
    "start the service, the dispatcher and a webhook endpoint",
    "a dispatcher dies between a push and its delete",
    "register customers and reminders over the API",
    "cron sweep: publish what is inside the 7-day horizon",
    "while queued: cancel, reschedule, unsubscribe",
    "dispatch what is due now (retries included)",
    "travel +1 hour: queued messages meet changed plans",
    "travel +3 hours: the rescheduled reminder",
    "travel +6 days: the delayed message; the 8-day one enters the horizon",
    "travel +8 days: the last reminder",
)


@dataclass
class DemoResult:
    """What the ledger says at the end, plus what the queue and the endpoint saw."""

    rows: list[dict[str, Any]]
    counts: dict[tuple[str, str | None], int]
    dead_letters: int
    queue: dict[str, int]
    answers: dict[str, list[str]]
    paths: dict[str, str]
    webhook_requests: dict[str, int]
    outbox: Path
    started_at: datetime


def check_result(result: DemoResult) -> list[str]:
    """What differs from the outcomes the scenario must produce (empty when all hold)."""
    problems = []
    by_reminder: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in result.rows:
        by_reminder[row["reminder_id"]].append(row)
    for case in CASES:
        outcomes = sorted((row["channel"], row["outcome"]) for row in by_reminder[case.reminder_id])
        wanted = sorted((channel, case.expect) for channel in case.channels)
        if outcomes != wanted:
            problems.append(f"{case.reminder_id}: ledger {outcomes}, expected {wanted}")
    twice = result.answers.get("demo:pushed-twice email")
    if twice != ["sent", "duplicate"]:
        problems.append(f"demo:pushed-twice was answered {twice}, expected sent then duplicate")
    if result.queue.get("ready"):
        problems.append(f"{result.queue['ready']} messages still in the queue")
    return problems


def format_offset(delta: timedelta) -> str:
    """``+6d 0h 05m`` style offsets from the demo's start."""
    total = int(delta.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"+{days}d {hours}h {minutes:02d}m"
    if hours:
        return f"+{hours}h {minutes:02d}m"
    return f"+{minutes}m {seconds:02d}s"
