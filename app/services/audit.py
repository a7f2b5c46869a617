"""``reminders audit``: the ledger's invariants checked on a live database.

Each invariant is one bounded, index-backed query (``app/db/audit_repo.py``) that names up
to ``limit`` offending ids. The CLI exits 1 when any holds an id, ``GET /v1/audit`` returns
the same report, and ``/metrics`` exposes one gauge per invariant.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import attempts_repo, audit_repo


@dataclass(frozen=True, slots=True)
class AuditLimits:
    """How much slack each invariant allows, and how many ids it names at most."""

    # A ``sending`` row may outlive its lease by this much before it is a violation: the
    # next redelivery reclaims it (queues come back within minutes).
    lease_margin: timedelta = timedelta(minutes=15)
    # An open reminder this long past its due time must be final or still carried.
    due_grace: timedelta = timedelta(hours=1)
    # Sends changed this recently are checked for a second ``sent`` row of their channel.
    sent_window: timedelta = timedelta(days=8)
    limit: int = 100


# Each invariant: what holds when it holds (its violations name the ids where it does not).
INVARIANTS: dict[str, str] = {
    "sent_twice": "no (reminder, channel) sent twice, across providers of the channel too",
    "lease_long_expired": "no send is still 'sending' long after its lease ended",
    "final_not_settled": "a reminder whose every channel is final is done or cancelled",
    "overdue_without_message": "a reminder past due plus grace is final or still carried by "
    "a live message",
    "dead_message_unrecorded": "every message in the queue's dead list has a final ledger "
    "row or a dead letter",
    "dead_letter_mismatch": "open dead letters and 'dead' send records match one to one",
    "provider_called_twice": "no send's provider, without an idempotency key of its own, was "
    "called by two attempts that may each have been accepted (sent or unknown outcome)",
    "reclaimed_without_outcome": "no attempt took over a send whose earlier attempt never "
    "recorded an outcome (its worker stalled or died, perhaps after calling the provider)",
    "accepted_by_two_providers": "no (reminder, channel) has attempts that may each have "
    "been accepted (sent or unknown outcome) at two providers (failover)",
}


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Offending ids per invariant (an empty list: it holds)."""

    checked_at: datetime
    violations: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every invariant holds."""
        return not any(self.violations.values())

    def to_json(self) -> dict[str, Any]:
        """The report as the CLI prints it and ``GET /v1/audit`` returns it."""
        return {
            "ok": self.ok,
            "checked_at": self.checked_at.isoformat(),
            "invariants": [
                {
                    "name": name,
                    "holds": not self.violations[name],
                    "description": description,
                    "violations": len(self.violations[name]),
                    "examples": self.violations[name][:5],
                }
                for name, description in INVARIANTS.items()
            ],
        }


async def run_audit(
    conn: AsyncConnection, *, now: datetime, limits: AuditLimits | None = None
) -> AuditReport:
    """Check every invariant now (reads only)."""
    limits = limits or AuditLimits()
    n = limits.limit
    checks: dict[str, Callable[[], Awaitable[list[str]]]] = {
        "sent_twice": lambda: audit_repo.sent_twice(conn, since=now - limits.sent_window, limit=n),
        "lease_long_expired": lambda: audit_repo.leases_long_expired(
            conn, before=now - limits.lease_margin, limit=n
        ),
        "final_not_settled": lambda: audit_repo.final_but_open(conn, now=now, limit=n),
        "overdue_without_message": lambda: audit_repo.overdue_without_message(
            conn, before=now - limits.due_grace, limit=n
        ),
        "dead_message_unrecorded": lambda: audit_repo.dead_messages_unrecorded(conn, limit=n),
        "dead_letter_mismatch": lambda: audit_repo.dead_letters_inconsistent(conn, limit=n),
        "provider_called_twice": lambda: attempts_repo.calls_maybe_accepted_twice(
            conn, since=now - limits.sent_window, limit=n
        ),
        "reclaimed_without_outcome": lambda: attempts_repo.reclaims_without_outcome(
            conn, since=now - limits.sent_window, limit=n
        ),
        "accepted_by_two_providers": lambda: attempts_repo.accepted_by_two_providers(
            conn, since=now - limits.sent_window, limit=n
        ),
    }
    return AuditReport(now, {name: await check() for name, check in checks.items()})


async def repair_final_reminders(conn: AsyncConnection, *, now: datetime, limit: int = 1000) -> int:
    """Settle ``done`` the reminders whose every channel is already final (rows the
    two-channel race left ``enqueued`` before it was fixed); how many."""
    return await audit_repo.settle_final_reminders(conn, now=now, limit=limit)


async def audit_database(
    engine: AsyncEngine, *, now: datetime, repair: bool = False
) -> AuditReport:
    """The audit as the CLI and the API run it: first the repair when asked, then the
    checks in a read-only connection."""
    if repair:
        async with engine.begin() as conn:
            await repair_final_reminders(conn, now=now)
    async with engine.connect() as conn:
        return await run_audit(conn, now=now)
