"""The dead-letter console: list, show and redrive failed sends (API, CLI and admin page).

A redrive resets the send record in one transaction, commits, and only then publishes
the new message (side effects after commit). If the queue refuses the message the
dead letters are reopened and the record stays ``pending`` with nothing attempted, which
the rules in ``app.domain.redrive`` treat as redrivable again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.db import dead_letters_repo, operations_repo, reminders_repo
from app.domain.errors import InvalidInput, NotFound, PublishError
from app.domain.messages import OutgoingMessage
from app.domain.ports import QueuePublisher
from app.domain.redrive import (
    DeadLetterFilter,
    RedriveAction,
    RedriveCandidate,
    RedrivePlan,
    SendFilter,
    plan_redrive,
)

MAX_PAGE = 500
MAX_REDRIVE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a keyset-paginated listing."""

    items: list[dict[str, Any]]
    next_cursor: str | None


def parse_cursor(cursor: str | None) -> int:
    """The id a cursor stands for (0 for the first page); InvalidInput when garbled."""
    if not cursor:
        return 0
    if not cursor.isdigit():
        raise InvalidInput("cursor", "is not a cursor returned by this API")
    return int(cursor)


def _page(rows: list[dict[str, Any]], limit: int) -> Page:
    more = len(rows) > limit
    items = rows[:limit]
    return Page(items, str(items[-1]["id"]) if more and items else None)


def _with_age(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    created = row.get("created_at")
    return {**row, "age_seconds": (now - created).total_seconds() if created else None}


async def list_dead_letters(
    conn: AsyncConnection,
    filters: DeadLetterFilter,
    *,
    now: datetime,
    cursor: str | None = None,
    limit: int = 50,
) -> Page:
    """Dead letters matching the filters, oldest first, with their send record's state."""
    limit = max(1, min(limit, MAX_PAGE))
    rows = await dead_letters_repo.list_dead_letters(
        conn, filters, now=now, after_id=parse_cursor(cursor), limit=limit + 1
    )
    return _page([_with_age(row, now) for row in rows], limit)


async def list_sends(
    conn: AsyncConnection,
    filters: SendFilter,
    *,
    now: datetime,
    cursor: str | None = None,
    limit: int = 50,
) -> Page:
    """Send records matching the filters (e.g. stuck past their lease, terminal failures)."""
    limit = max(1, min(limit, MAX_PAGE))
    rows = await operations_repo.list_sends(
        conn, filters, now=now, after_id=parse_cursor(cursor), limit=limit + 1
    )
    return _page(rows, limit)


async def summarize(conn: AsyncConnection, *, now: datetime) -> list[dict[str, Any]]:
    """Open dead letters grouped by reason and error class, with the oldest one's age."""
    groups = await dead_letters_repo.summarize_open(conn)
    for group in groups:
        oldest = group["oldest_at"]
        group["oldest_age_seconds"] = (now - oldest).total_seconds() if oldest else None
    return groups


async def show_dead_letter(
    conn: AsyncConnection,
    dead_letter_id: int,
    *,
    now: datetime,
    queue_for: Callable[[str], str],
) -> dict[str, Any]:
    """A dead letter, its send record with the ledger history, and what a redrive would do."""
    row = await dead_letters_repo.get_dead_letter(conn, dead_letter_id)
    if row is None:
        raise NotFound(f"no dead letter {dead_letter_id}")
    send_id = row["send_record_id"]
    send = await operations_repo.get_send(conn, send_id) if send_id is not None else None
    history = await dead_letters_repo.dead_letters_of_send(conn, send_id) if send_id else [row]
    reminder = (
        await reminders_repo.get_reminder(conn, row["reminder_id"]) if row["reminder_id"] else None
    )
    plan = plan_redrive(await _candidate_for_dead_letter(conn, row), now=now)
    return {
        "dead_letter": _with_age(row, now),
        "send_record": send,
        "reminder": reminder,
        "history": history,
        "redrive": RedriveItem(plan, _queue(plan, queue_for)).to_json(),
    }


# --- Redrive ---


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
        plan = plan_redrive(await _candidate_for_dead_letter(conn, row), now=now)
    return await _execute(ctx, [plan], now=now, dry_run=dry_run)


async def redrive_dead_letters(
    ctx: RedriveContext, filters: DeadLetterFilter, *, dry_run: bool, limit: int = 100
) -> RedriveReport:
    """Redrive every open dead letter matching the filters (at most ``limit``)."""
    now = ctx.clock()
    limit = max(1, min(limit, MAX_REDRIVE_BATCH))
    plans: list[RedrivePlan] = []
    seen: dict[int, int] = {}  # send record id -> the dead letter planned for it
    async with ctx.engine.connect() as conn:
        rows = await dead_letters_repo.list_dead_letters(
            conn, replace(filters, redriven=False), now=now, limit=limit
        )
        for row in rows:
            candidate = await _candidate_for_dead_letter(conn, row)
            first = seen.setdefault(candidate.send.id, row["id"]) if candidate.send else None
            if first is not None and first != row["id"]:
                reason = f"same send record as dead letter {first}"
                plans.append(RedrivePlan(candidate, RedriveAction.SKIP, reason))
            else:
                plans.append(plan_redrive(candidate, now=now))
    return await _execute(ctx, plans, now=now, dry_run=dry_run)


async def redrive_send(ctx: RedriveContext, send_record_id: int, *, dry_run: bool) -> RedriveReport:
    """Redrive one send record directly (a terminal failure after the data was fixed, a stuck
    send, or a dead one)."""
    now = ctx.clock()
    async with ctx.engine.connect() as conn:
        send = await operations_repo.send_snapshot(conn, send_record_id)
        if send is None:
            raise NotFound(f"no send record {send_record_id}")
        reminder = await operations_repo.reminder_snapshot(conn, send.reminder_id)
    candidate = RedriveCandidate(None, send.reminder_id, send.channel, send, reminder)
    return await _execute(ctx, [plan_redrive(candidate, now=now)], now=now, dry_run=dry_run)


async def _candidate_for_dead_letter(
    conn: AsyncConnection, row: dict[str, Any]
) -> RedriveCandidate:
    reminder_id, channel = _target_of(row)
    send = None
    if row["send_record_id"] is not None:
        send = await operations_repo.send_snapshot(conn, row["send_record_id"])
    elif reminder_id and channel:
        send = await operations_repo.send_snapshot_for(conn, reminder_id, channel)
    reminder = await operations_repo.reminder_snapshot(conn, reminder_id) if reminder_id else None
    return RedriveCandidate(row["id"], reminder_id, channel, send, reminder, row["redriven_at"])


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


def _queue(plan: RedrivePlan, queue_for: Callable[[str], str]) -> str | None:
    return queue_for(plan.candidate.channel) if plan.publishes and plan.candidate.channel else None


async def _execute(
    ctx: RedriveContext, plans: list[RedrivePlan], *, now: datetime, dry_run: bool
) -> RedriveReport:
    items = [RedriveItem(plan, _queue(plan, ctx.queue_for)) for plan in plans]
    if dry_run:
        return RedriveReport(dry_run=True, items=items)
    async with ctx.engine.begin() as conn:
        items = [await _apply(conn, item, now) for item in items]
    return await _publish(ctx, items, now)


async def _apply(conn: AsyncConnection, item: RedriveItem, now: datetime) -> RedriveItem:
    plan = item.plan
    if not plan.publishes:
        return item
    candidate = plan.candidate
    if candidate.send is not None:
        if not await operations_repo.reset_for_redrive(conn, candidate.send, now=now):
            return replace(item, error="skipped: the send record changed meanwhile; look again")
        await dead_letters_repo.mark_redriven(conn, now=now, send_record_id=candidate.send.id)
    if candidate.dead_letter_id is not None:
        await dead_letters_repo.mark_redriven(
            conn, now=now, dead_letter_id=candidate.dead_letter_id
        )
    assert candidate.reminder_id is not None
    await operations_repo.reopen_reminder(conn, candidate.reminder_id, now=now)
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
