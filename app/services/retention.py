"""Retention: the database does not grow forever.

Reminders that are ``done`` or ``cancelled`` and unchanged for the retention period go, with
their ledger rows; so do dead letters redriven or discarded that long ago. Work is done in
short, bounded transactions (one batch each) so deliveries never queue behind a purge, and it
stops when the caller's time budget is spent: the sweep purges with what is left of its budget
after publishing, ``reminders purge`` until nothing is left.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import retention_repo
from app.domain.states import ReminderState


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long finished rows are kept, and how many go per transaction."""

    days: float = 90.0
    batch_size: int = 500

    def cutoff(self, now: datetime) -> datetime:
        """Rows last changed strictly before this instant are old enough to purge."""
        return now - timedelta(days=self.days)


@dataclass(slots=True)
class PurgeReport:
    """What a purge deleted (or, in a dry run, would delete)."""

    cutoff: datetime
    dry_run: bool = False
    counts: dict[str, int] = field(
        default_factory=lambda: {"reminders": 0, "send_records": 0, "dead_letters": 0}
    )
    # False when the time budget ran out with purgeable rows possibly left.
    complete: bool = True

    def to_json(self) -> dict[str, object]:
        """The report as ``reminders purge`` and the sweep report print it."""
        return {
            **self.counts,
            "cutoff": self.cutoff.isoformat(),
            "complete": self.complete,
            "dry_run": self.dry_run,
        }


def _never() -> bool:
    return False


async def purge(
    engine: AsyncEngine,
    *,
    now: datetime,
    policy: RetentionPolicy,
    out_of_time: Callable[[], bool] = _never,
) -> PurgeReport:
    """Delete what the policy says is old, batch by batch, until done or out of time."""
    report = PurgeReport(cutoff=policy.cutoff(now))
    for state in retention_repo.PURGEABLE_STATES:
        if not await _purge_reminders(engine, state, report, policy, out_of_time):
            report.complete = False
            return report
    while not out_of_time():
        async with engine.begin() as conn:
            deleted = await retention_repo.delete_closed_dead_letters(
                conn, before=report.cutoff, limit=policy.batch_size
            )
        report.counts["dead_letters"] += deleted
        if deleted < policy.batch_size:
            return report
    report.complete = False
    return report


async def _purge_reminders(
    engine: AsyncEngine,
    state: ReminderState,
    report: PurgeReport,
    policy: RetentionPolicy,
    out_of_time: Callable[[], bool],
) -> bool:
    """Purge one state's old reminders; False when the budget ran out first."""
    while not out_of_time():
        async with engine.begin() as conn:
            ids = await retention_repo.lock_purgeable_reminders(
                conn, state, before=report.cutoff, limit=policy.batch_size
            )
            deleted = await retention_repo.delete_reminders(conn, ids)
        for table, count in deleted.items():
            report.counts[table] += count
        if len(ids) < policy.batch_size:
            return True
    return False


async def preview_purge(
    engine: AsyncEngine, *, now: datetime, policy: RetentionPolicy
) -> PurgeReport:
    """What ``purge`` would delete now, deleting nothing."""
    cutoff = policy.cutoff(now)
    async with engine.connect() as conn:
        counts = await retention_repo.count_purgeable(conn, before=cutoff)
    return PurgeReport(cutoff=cutoff, dry_run=True, counts=counts)
