"""What the admin page and /metrics show: figures computed from the ledger at read time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import dead_letters_repo, operations_repo, schedules_repo
from app.domain.errors import NotFound
from app.domain.redrive import DeadLetterFilter, SendFilter
from app.domain.states import DeliverySummary, SendState

from . import activity, dead_letters, discard, reminders
from .audit import INVARIANTS, AuditLimits, AuditReport

WINDOWS = (("1h", timedelta(hours=1)), ("24h", timedelta(days=1)), ("7d", timedelta(days=7)))
# The audit's checks for a customer who may have got a message twice (app/services/audit.py).
DOUBLE_SEND_CHECKS = (
    "provider_called_twice",
    "reclaimed_without_outcome",
    "accepted_by_two_providers",
)
EXAMPLES_SHOWN = 10


@dataclass(frozen=True, slots=True)
class LedgerFigures:
    """The ledger-derived gauges, read in one go (the metrics collector reports these)."""

    dead_letters: list[tuple[str, int, float | None]]  # reason, open count, oldest age seconds
    stuck_sends: int
    oldest_stuck_seconds: float | None
    sweep_lag_seconds: float
    queue_depth: list[tuple[str, str, int]] | None  # queue, state, messages; None: no table
    broken_schedules: int  # schedules the sweep skips until fixed (see services/materialize)
    settled_24h: dict[str, int]  # reminders settled done in the last 24 h, by delivery summary


def _age(now: datetime, moment: datetime | None) -> float | None:
    return (now - moment).total_seconds() if moment else None


async def ledger_figures(conn: AsyncConnection, *, now: datetime) -> LedgerFigures:
    """Dead letters, stuck sends, sweep lag and embedded-queue depth as they are now."""
    letters = await operations_repo.open_dead_letters(conn)
    stuck, oldest_lease = await operations_repo.stuck_sends(conn, now=now)
    overdue = await operations_repo.oldest_overdue_scheduled(conn, now=now)
    return LedgerFigures(
        dead_letters=[(reason, count, _age(now, oldest)) for reason, count, oldest in letters],
        stuck_sends=stuck,
        oldest_stuck_seconds=_age(now, oldest_lease),
        sweep_lag_seconds=_age(now, overdue) or 0.0,
        queue_depth=await operations_repo.embedded_queue_depth(conn, now=now),
        broken_schedules=await schedules_repo.count_broken(conn),
        settled_24h={summary.value: 0 for summary in DeliverySummary}
        | await operations_repo.settled_since(conn, now - timedelta(days=1)),
    )


async def outcome_windows(conn: AsyncConnection, *, now: datetime) -> dict[str, Any]:
    """Attempts by result over the last hour, day and week (rows: results), from the
    append-only history of attempts."""
    columns = [name for name, _ in WINDOWS]
    counts = {
        name: await operations_repo.outcome_counts_since(conn, now - span) for name, span in WINDOWS
    }
    outcomes = sorted({outcome for window in counts.values() for outcome in window})
    rows = [(outcome, [counts[name].get(outcome, 0) for name in columns]) for outcome in outcomes]
    return {"windows": columns, "rows": rows}


def double_sends(audit: AuditReport | None, age_seconds: float | None) -> dict[str, Any]:
    """The audit's double-send checks as the admin page shows them, from the last audit the
    metrics task ran (never a new one: on a large ledger the audit is too heavy to run on
    every refresh of the page). ``checks`` is None before its first reading."""
    if audit is None:
        return {"checks": None, "age_seconds": age_seconds}
    checks = [
        {
            "name": name,
            "description": INVARIANTS[name],
            "count": len(audit.violations.get(name, [])),
            "examples": audit.violations.get(name, [])[:EXAMPLES_SHOWN],
            "capped": len(audit.violations.get(name, [])) >= AuditLimits().limit,  # at least
        }
        for name in DOUBLE_SEND_CHECKS
    ]
    return {"checks": checks, "age_seconds": age_seconds, "checked_at": audit.checked_at}


async def overview(
    conn: AsyncConnection,
    *,
    now: datetime,
    limit: int = 50,
    letters_cursor: str | None = None,
    sends_cursor: str | None = None,
    audit: AuditReport | None = None,
    audit_age_seconds: float | None = None,
) -> dict[str, Any]:
    """Everything the admin page's front shows, in one read (dead letters and recent sends
    one page each, from the given cursors); ``audit``: the metrics task's last audit."""
    open_letters = await dead_letters.list_dead_letters(
        conn, DeadLetterFilter(), now=now, cursor=letters_cursor, limit=limit
    )
    recent = await activity.recent_sends(conn, cursor=sends_cursor, limit=limit)
    stuck = await dead_letters.list_sends(conn, SendFilter(stuck=True), now=now, limit=limit)
    terminal = await dead_letters.list_sends(
        conn, SendFilter(state=SendState.TERMINAL_FAILURE, outcome="terminal"), now=now, limit=limit
    )
    return {
        "now": now,
        "outcomes": await outcome_windows(conn, now=now),
        "groups": await dead_letters.summarize(conn, now=now),
        "dead_letters": open_letters.items,
        "dead_letters_next": open_letters.next_cursor,
        "recent_sends": recent.items,
        "recent_sends_next": recent.next_cursor,
        "hourly": await activity.outcomes_per_hour(conn, now=now),
        "discardable": await discard.discardable_ids(conn, open_letters.items, now=now),
        "stuck": stuck.items,
        "terminal": terminal.items,
        "broken_schedules": await schedules_repo.list_broken(conn, limit=limit),
        "figures": await ledger_figures(conn, now=now),
        "double_sends": double_sends(audit, audit_age_seconds),
    }


async def lookup_reminder(
    conn: AsyncConnection, reminder_id: str, *, now: datetime
) -> dict[str, Any] | None:
    """A reminder with its send records and every dead letter it produced, or None."""
    try:
        found = await reminders.get_reminder(conn, reminder_id)
    except NotFound:
        return None
    letters = await dead_letters_repo.list_dead_letters(
        conn, DeadLetterFilter(reminder_id=reminder_id, redriven=None), now=now
    )
    return {**found, "dead_letters": letters}
