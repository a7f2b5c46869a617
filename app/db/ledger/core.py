"""The ledger gateway on SQLAlchemy Core (``repo``): any database, SQLite always.

Each method is its own short unit of work on the engine's pool: single statements in
autocommit (no BEGIN/COMMIT round trips), multi-statement phases in one transaction.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.domain.errors import LeaseLost, LedgerUnavailable
from app.domain.ledger import (
    UNNAMED_CLAIMANT,
    AttemptEnd,
    Claim,
    Claimant,
    ClaimRequest,
    DeadLetterEntry,
    Earlier,
    LedgerKey,
    ProviderRow,
    SendRecordView,
)
from app.domain.messages import ReminderView
from app.domain.ports import LedgerGateway
from app.domain.states import FINAL_SEND_STATES, SendState

from .. import attempts_repo, customers_repo, dead_letters_repo, suppressions_repo
from ..engine import autocommit
from ..failures import is_unavailable
from . import repo

T = TypeVar("T")


class CoreLedger(LedgerGateway):
    """The ledger phases on SQLAlchemy Core, for any database."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.autocommit = autocommit(engine)  # single statements skip BEGIN/COMMIT

    async def _transaction(self, phase: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run a phase of several statements in one transaction."""
        async with connection_failures_as_unavailable(), self.engine.begin() as conn:
            return await phase(conn)

    async def _statement(self, phase: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run a phase of one statement in autocommit (no BEGIN/COMMIT round trips)."""
        async with connection_failures_as_unavailable(), self.autocommit.connect() as conn:
            return await phase(conn)

    @property
    def checked_out(self) -> int:
        """Connections checked out of the engine's pool right now."""
        return int(self.engine.pool.checkedout())  # type: ignore[attr-defined]

    async def claim_or_read(
        self,
        key: LedgerKey,
        *,
        now: datetime,
        lease_until: datetime,
        earlier: Earlier = None,
        claimant: Claimant = UNNAMED_CLAIMANT,
    ) -> Claim:
        """Claim and append its attempt (one transaction), then read the send context or
        the row (another statement)."""
        claimed = await self._transaction(
            lambda conn: claim_with_attempt(conn, key, now, lease_until, earlier, claimant)
        )
        if claimed is None:
            return Claim(False, await self.get_send_record(key))
        context = await self._statement(lambda conn: repo.load_send_context(conn, key.reminder_id))
        return Claim(True, claimed, context)

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[Claim | BaseException]:
        """Each claim in turn (the engine's databases batch them in subclasses)."""
        results: list[Claim | BaseException] = []
        for request in requests:
            try:
                claim = await self.claim_or_read(
                    request.key, now=request.now, lease_until=request.lease_until,
                    claimant=request.claimant,
                )  # fmt: skip
            except LedgerUnavailable:
                raise
            except Exception as error:  # that request's alone
                results.append(error)
            else:
                results.append(claim)
        return results

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        return await self._statement(lambda conn: repo.get_send_record(conn, key))

    async def suppression_reasons(self, emails: Sequence[str]) -> dict[str, str]:
        """Which of these normalized addresses are suppressed, and why (one statement): the
        suppression list's lookups, on the path of every email send."""
        return await self._statement(lambda conn: suppressions_repo.reasons_for(conn, emails))

    async def channel_rows(self, reminder_id: str, channel: str) -> dict[str, ProviderRow]:
        """Every provider's row of one (reminder, channel), by provider (failover)."""
        return await self._statement(lambda conn: repo.channel_rows(conn, reminder_id, channel))

    async def hand_over(self, key: LedgerKey, *, now: datetime) -> bool:
        """Give the (reminder, channel) to the next provider if the ledger proves
        ``key.provider`` never accepted it (``repo.hand_over``, one statement)."""
        return await self._statement(lambda conn: repo.hand_over(conn, key, now=now))

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt (the message was stale)."""
        return await self._statement(lambda conn: repo.release_claim(conn, record, now=now))

    async def renew_lease(
        self, record: SendRecordView, *, now: datetime, lease_until: datetime
    ) -> bool:
        """Extend a live claim's lease while its send runs (one statement)."""
        return await self._statement(
            lambda conn: repo.renew_lease(conn, record, now=now, lease_until=lease_until)
        )

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        ended: AttemptEnd | None = None,
    ) -> None:
        """Compare-and-set the claimed row (with its attempt's outcome) and, once every
        channel is final, the reminder."""
        await self._transaction(
            lambda conn: finalize_or_raise(conn, record, values, ended, now=now)
        )
        await self.settle_if_final(reminder, values, now=now)

    async def finalize_failed_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        dead_letter: DeadLetterEntry | None,
        disable_webhook: bool,
        ended: AttemptEnd | None = None,
    ) -> None:
        """The fenced finalize, the dead letter and the 410's webhook switch-off, together."""

        async def phase(conn: AsyncConnection) -> None:
            await finalize_or_raise(conn, record, values, ended, now=now)
            if dead_letter is not None:
                await _add_dead_letter(conn, dead_letter, now=now)
            if disable_webhook:
                await customers_repo.disable_webhook(conn, reminder.customer_id, now=now)

        await self._transaction(phase)
        await self.settle_if_final(reminder, values, now=now)

    async def settle_if_final(
        self, reminder: ReminderView, values: Mapping[str, Any], *, now: datetime
    ) -> None:
        """After a committed finalize that made its row final: the reminder is done once
        every channel is (its own statement: see ``repo.settle_reminder``)."""
        if not makes_final(values):
            return
        channels = len(reminder.channels)
        await self._statement(
            lambda conn: repo.settle_reminder(conn, reminder.id, channel_count=channels, now=now)
        )

    async def record_outcome(
        self, record: SendRecordView, ended: AttemptEnd, *, now: datetime
    ) -> None:
        """Write how the attempt ended, once (``attempts_repo.record_outcome``)."""
        await self._statement(
            lambda conn: attempts_repo.record_outcome(conn, record, ended, finished_at=now)
        )

    async def count_outcomes(self, record: SendRecordView, outcome: str) -> int:
        """How many attempts of this send ended with ``outcome``."""
        return await self._statement(
            lambda conn: attempts_repo.count_outcomes(conn, record.id, outcome)
        )

    async def record_dead_letter(self, entry: DeadLetterEntry, *, now: datetime) -> None:
        """Keep an authentic but unusable delivery for operators (one statement)."""
        await self._statement(lambda conn: _add_dead_letter(conn, entry, now=now))


def makes_final(values: Mapping[str, Any]) -> bool:
    """Whether a finalize with these values leaves its row final (the reminder may settle)."""
    return SendState(values["state"]) in FINAL_SEND_STATES


@contextlib.asynccontextmanager
async def connection_failures_as_unavailable() -> AsyncIterator[None]:
    """A database that could not answer (``failures.is_unavailable``: not a refused
    statement) as ``LedgerUnavailable``: the caller may retry, and the pool has already
    discarded a broken connection (``invalidated``)."""
    try:
        yield
    except LedgerUnavailable:
        raise
    except Exception as error:
        if is_unavailable(error):  # failures.py: by SQLSTATE or SQLite result code
            cause = getattr(error, "orig", None) or error
            raise LedgerUnavailable(f"database unavailable: {cause!r}"[:300]) from error
        raise


async def claim_with_attempt(
    conn: AsyncConnection,
    key: LedgerKey,
    now: datetime,
    lease_until: datetime,
    earlier: Earlier,
    claimant: Claimant,
) -> SendRecordView | None:
    """The claim and its attempt row, in the caller's transaction: no committed claim is
    ever without its history row."""
    claimed = await repo.claim_send(conn, key, now=now, lease_until=lease_until, earlier=earlier)
    if claimed is not None:
        await attempts_repo.record_attempt(
            conn, claimed, key, claimed_by=claimant.worker, claimed_at=now,
            provider_deduplicates=claimant.provider_deduplicates,
        )  # fmt: skip
    return claimed


async def finalize_or_raise(
    conn: AsyncConnection,
    record: SendRecordView,
    values: Mapping[str, Any],
    ended: AttemptEnd | None,
    *,
    now: datetime,
) -> None:
    # Raising inside ``engine.begin()`` rolls the whole phase back: a worker that lost its
    # lease writes nothing, neither the row nor what goes with it.
    if not await repo.update_claimed_send(conn, record, now=now, values=values):
        raise LeaseLost()
    if ended is not None:
        await attempts_repo.record_outcome(conn, record, ended, finished_at=now)


async def _add_dead_letter(conn: AsyncConnection, entry: DeadLetterEntry, *, now: datetime) -> None:
    fields = {field.name: getattr(entry, field.name) for field in dataclasses.fields(entry)}
    await dead_letters_repo.add_dead_letter(conn, now=now, **fields)
