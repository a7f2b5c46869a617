"""Redrive: publish failed sends again through the same idempotent receiver.

A redrive resets the send records in one transaction, commits, and only then publishes
the new messages (side effects after commit). If the queue refuses them the dead letters
are reopened and the records stay ``pending`` with nothing attempted, which the rules in
``app.domain.redrive`` treat as redrivable again.

Set-based: a batch (up to ``MAX_REDRIVE_BATCH``) is planned from one listing and three
reads, and applied in three statements, however many items it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import dead_letters_repo, redrive_repo
from app.domain.errors import NotFound, PublishError
from app.domain.messages import OutgoingMessage
from app.domain.ports import QueuePublisher
from app.domain.redrive import (
    DeadLetterFilter,
    RedriveAction,
    RedriveCandidate,
    RedrivePlan,
    plan_redrive,
)

MAX_REDRIVE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class RedriveItem:
    """What happened (or, in a dry run, would happen) to one candidate."""

    plan: RedrivePlan
    queue: str | None
    message_id: str | None = None
    error: str | None = None

    @property
    def published(self) -> bool:
        """True when a message was (or would be) published for this item."""
        return self.plan.publishes and self.error is None

    def to_json(self) -> dict[str, Any]:
        """The item as the API, the CLI and the admin page show it."""
        candidate, send = self.plan.candidate, self.plan.candidate.send
        message = None
        if self.plan.publishes:
            message = {
                "queue": self.queue,
                "payload": self.plan.payload,
                "idempotency_key": self.plan.idempotency_key,
                "delay_seconds": 0,
            }
        return {
            "dead_letter_id": candidate.dead_letter_id,
            "send_record_id": send.id if send else None,
            "reminder_id": candidate.reminder_id,
            "channel": candidate.channel,
            "send_state": send.state.value if send else None,
            "action": RedriveAction.SKIP.value if self.error else self.plan.action.value,
            "reason": self.error or self.plan.reason,
            "redrive_count": self.plan.new_redrive_count,
            "message": message,
            "message_id": self.message_id,
        }


@dataclass(slots=True)
class RedriveReport:
    """The result of a redrive request; a dry run lists exactly what would be published."""

    dry_run: bool
    items: list[RedriveItem] = field(default_factory=list)
    error: str | None = None

    @property
    def published(self) -> int:
        """How many messages were (or would be) published."""
        return sum(1 for item in self.items if item.published)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON."""
        body: dict[str, Any] = {
            "dry_run": self.dry_run,
            "published": self.published,
            "skipped": len(self.items) - self.published,
            "items": [item.to_json() for item in self.items],
        }
        if self.error:
            body["error"] = self.error
        return body


@dataclass(frozen=True, slots=True)
class RedriveContext:
    """The ports a redrive needs: where to publish, which queue, what time it is."""

    engine: AsyncEngine
    publisher: QueuePublisher
    queue_for: Callable[[str], str]
    clock: Callable[[], datetime]


async def redrive_dead_letter(
    ctx: RedriveContext, dead_letter_id: int, *, dry_run: bool
) -> RedriveReport:
    """Redrive the send behind one dead letter (or a quarantined message's reminder)."""
    now = ctx.clock()
    async with ctx.engine.connect() as conn:
        row = await dead_letters_repo.get_dead_letter(conn, dead_letter_id)
        if row is None:
            raise NotFound(f"no dead letter {dead_letter_id}")
        [candidate] = await candidates_for_dead_letters(conn, [row])
    return await _execute(ctx, [plan_redrive(candidate, now=now)], now=now, dry_run=dry_run)


async def redrive_dead_letters(
    ctx: RedriveContext, filters: DeadLetterFilter, *, dry_run: bool, limit: int = 100
) -> RedriveReport:
    """Redrive every open dead letter matching the filters (at most ``limit``)."""
    now = ctx.clock()
    limit = max(1, min(limit, MAX_REDRIVE_BATCH))
    async with ctx.engine.connect() as conn:
        rows = await dead_letters_repo.list_dead_letters(
            conn, replace(filters, redriven=False, discarded=False), now=now, limit=limit
        )
        candidates = await candidates_for_dead_letters(conn, rows)
    return await _execute(ctx, _plan_once_per_send(candidates, now), now=now, dry_run=dry_run)


def _plan_once_per_send(candidates: Sequence[RedriveCandidate], now: datetime) -> list[RedrivePlan]:
    plans: list[RedrivePlan] = []
    seen: dict[int, int | None] = {}  # send record id -> the dead letter planned for it
    for candidate in candidates:
        send_id, letter = (candidate.send.id if candidate.send else None), candidate.dead_letter_id
        first = seen.setdefault(send_id, letter) if send_id is not None else None
        if first is not None and first != letter:
            reason = f"same send record as dead letter {first}"
            plans.append(RedrivePlan(candidate, RedriveAction.SKIP, reason))
        else:
            plans.append(plan_redrive(candidate, now=now))
    return plans


async def redrive_send(ctx: RedriveContext, send_record_id: int, *, dry_run: bool) -> RedriveReport:
    """Redrive one send record directly (a terminal failure after the data was fixed, a stuck
    send, or a dead one)."""
    now = ctx.clock()
    async with ctx.engine.connect() as conn:
        send = await redrive_repo.send_snapshot(conn, send_record_id)
        if send is None:
            raise NotFound(f"no send record {send_record_id}")
        reminders = await redrive_repo.reminder_snapshots(conn, [send.reminder_id])
    reminder = reminders.get(send.reminder_id)
    candidate = RedriveCandidate(None, send.reminder_id, send.channel, send, reminder)
    return await _execute(ctx, [plan_redrive(candidate, now=now)], now=now, dry_run=dry_run)


async def candidates_for_dead_letters(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]]
) -> list[RedriveCandidate]:
    """What each dead letter would redrive: its send record and reminder, read in bulk."""
    targets = [_target_of(row) for row in rows]
    sends = await redrive_repo.send_snapshots(
        conn, [row["send_record_id"] for row in rows if row["send_record_id"] is not None]
    )
    sends_for = await redrive_repo.send_snapshots_for(
        conn,
        [
            (reminder_id, channel)
            for row, (reminder_id, channel) in zip(rows, targets, strict=True)
            if row["send_record_id"] is None and reminder_id and channel
        ],
    )
    reminders = await redrive_repo.reminder_snapshots(
        conn, [reminder_id for reminder_id, _ in targets if reminder_id]
    )
    candidates = []
    for row, (reminder_id, channel) in zip(rows, targets, strict=True):
        if row["send_record_id"] is not None:
            send = sends.get(row["send_record_id"])
        else:
            send = sends_for.get((reminder_id, channel)) if reminder_id and channel else None
        reminder = reminders.get(reminder_id) if reminder_id else None
        candidates.append(
            RedriveCandidate(
                row["id"],
                reminder_id,
                channel,
                send,
                reminder,
                redriven_at=row["redriven_at"],
                discarded_at=row.get("discarded_at"),
                quarantined=row["send_record_id"] is None,
            )
        )
    return candidates


def _target_of(row: dict[str, Any]) -> tuple[str | None, str | None]:
    # Exhausted sends name their reminder and channel; a quarantined message only has them
    # if its payload was well-formed enough to carry both.
    if row["reminder_id"] and row["channel"]:
        return row["reminder_id"], row["channel"]
    payload = row["payload"] if isinstance(row["payload"], dict) else {}
    reminder_id, channel = payload.get("reminder_id"), payload.get("channel")
    if row["reason"] == "malformed" or not isinstance(reminder_id, str):
        return None, None
    return reminder_id, channel if isinstance(channel, str) else None


def queue_of(plan: RedrivePlan, queue_for: Callable[[str], str]) -> str | None:
    """The queue a plan publishes to (None when it publishes nothing)."""
    return queue_for(plan.candidate.channel) if plan.publishes and plan.candidate.channel else None


async def _execute(
    ctx: RedriveContext, plans: list[RedrivePlan], *, now: datetime, dry_run: bool
) -> RedriveReport:
    items = [RedriveItem(plan, queue_of(plan, ctx.queue_for)) for plan in plans]
    if dry_run:
        return RedriveReport(dry_run=True, items=items)
    async with ctx.engine.begin() as conn:
        items = await _apply(conn, items, now)
    return await _publish(ctx, items, now)


async def _apply(
    conn: AsyncConnection, items: list[RedriveItem], now: datetime
) -> list[RedriveItem]:
    """Reset the sends (compare-and-set), stamp their dead letters, reopen their reminders."""
    publishing = [item.plan.candidate for item in items if item.plan.publishes]
    reset = await redrive_repo.reset_sends_for_redrive(
        conn, [c.send for c in publishing if c.send is not None], now=now
    )
    applied = [c for c in publishing if c.send is None or c.send.id in reset]
    await dead_letters_repo.mark_redriven(
        conn,
        now=now,
        send_record_ids=reset,
        dead_letter_ids=[c.dead_letter_id for c in applied if c.dead_letter_id is not None],
    )
    await redrive_repo.reopen_reminders(
        conn, [c.reminder_id for c in applied if c.reminder_id is not None], now=now
    )
    return [_unless_changed(item, reset) for item in items]


def _unless_changed(item: RedriveItem, reset: set[int]) -> RedriveItem:
    """The item, or a skip when its send record was not reset (it moved since planning)."""
    send = item.plan.candidate.send
    if item.plan.publishes and send is not None and send.id not in reset:
        return replace(item, error="skipped: the send record changed meanwhile; look again")
    return item


async def _publish(ctx: RedriveContext, items: list[RedriveItem], now: datetime) -> RedriveReport:
    # The resets are committed: now, and only now, hand the messages to the queue.
    chosen = [item for item in items if item.published]
    messages = [
        OutgoingMessage(
            queue=item.queue or "",
            payload=item.plan.payload or {},
            delay_seconds=0.0,
            idempotency_key=item.plan.idempotency_key or "",
        )
        for item in chosen
    ]
    if not messages:
        return RedriveReport(dry_run=False, items=items)
    try:
        ids = await ctx.publisher.publish_batch(messages)
    except PublishError as error:
        await _reopen(ctx, chosen, now)
        failed = {id(item) for item in chosen}
        note = f"not published: {error}; redrive again"
        items = [replace(item, error=note) if id(item) in failed else item for item in items]
        return RedriveReport(dry_run=False, items=items, error=str(error))
    published = dict(zip((id(item) for item in chosen), ids, strict=True))
    items = [replace(item, message_id=published.get(id(item))) for item in items]
    return RedriveReport(dry_run=False, items=items)


async def _reopen(ctx: RedriveContext, items: list[RedriveItem], now: datetime) -> None:
    sends = [item.plan.candidate.send.id for item in items if item.plan.candidate.send]
    letters = [
        item.plan.candidate.dead_letter_id
        for item in items
        if item.plan.candidate.dead_letter_id is not None
    ]
    async with ctx.engine.begin() as conn:
        await dead_letters_repo.unmark_redriven(
            conn, redriven_at=now, send_record_ids=sends, dead_letter_ids=letters
        )
