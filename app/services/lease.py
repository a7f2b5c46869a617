"""A live worker never outlives its lease unnoticed.

While a provider call runs, and after it until its outcome is recorded, the lease is
renewed every third of its length, so a slow but live send keeps the row (another worker's
claim stays refused), and so does a finalize that waits (for a connection, its group's
turn, a row lock): a redelivery past the first lease must not find the row free and send
again what was already accepted. When a renewal during the call is refused (the lease had
ended: the process stalled past it, and another worker may hold the row), the send is
cancelled (``LeaseEnded``: its outcome is unknown if the request had left); when the send
returns after the last renewed lease, that is logged and counted
(``reminders_leases_outlived``); the fenced finalize then decides: refused (``LeaseLost``)
when another worker took the row, accepted when nobody did. A renewal refused after the
call cancels nothing: the finalize committed (the row is no longer sending) or its fence
will say the row was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import structlog

from app.domain.errors import LedgerUnavailable
from app.domain.ledger import LedgerKey, SendRecordView
from app.domain.ports import LedgerGateway
from app.observability.metrics import LEASES_OUTLIVED

log = logging.getLogger("reminders.receiver")
events = structlog.get_logger("reminders.receiver")  # fields, not formatted text
T = TypeVar("T")


class LeaseEnded(Exception):
    """The lease ended (or is about to) before or during the provider call."""


@dataclass(slots=True)
class LeaseKeeper:
    """Renews one claim's lease while its send runs and until its outcome is recorded."""

    ledger: LedgerGateway
    clock: Callable[[], datetime]
    sleep: Callable[[float], Awaitable[None]]
    lease: timedelta
    key: LedgerKey
    record: SendRecordView
    lease_until: datetime
    reported: bool = False
    renewing: bool = False  # a renewal statement is in flight
    refused: bool = False  # a renewal was refused: the lease is over
    _sending: asyncio.Task[object] | None = None
    _renewer: asyncio.Task[None] | None = None

    @property
    def renewed_record(self) -> SendRecordView:
        """The claimed record with the lease as last renewed (what the finalize may use)."""
        return dataclasses.replace(self.record, lease_until=self.lease_until)

    async def run(self, send: Callable[[], Awaitable[T]]) -> T:
        """Await ``send`` with the lease renewed meanwhile; report a lease outlived. A
        renewal refused (another worker may hold the row now) cancels the send: LeaseEnded.
        The renewals go on after it (the finalize's wait) until ``release``."""
        self._sending = asyncio.current_task()
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew())
        try:
            result = await send()
        except asyncio.CancelledError:
            if not self.refused or self._sending is None:
                raise
            self._sending.uncancel()  # our own cancellation, told as what it means
            raise LeaseEnded() from None
        finally:
            self._sending = None  # from here a refused renewal cancels nothing
        if self.clock() > self.lease_until and not self.reported:
            self._outlived("send_outlasted_lease")
        return result

    async def release(self) -> None:
        """Stop renewing: the outcome is recorded (or the claim given back)."""
        renewer, self._renewer = self._renewer, None
        if renewer is None:
            return
        renewer.cancel()
        # Only a renewal statement in flight is waited for, so nothing after the send races
        # it; a renewer still sleeping (nearly every send) ends on its own, and the delivery
        # does not give up its turn on the event loop to watch it go.
        if self.renewing:
            with contextlib.suppress(asyncio.CancelledError):
                await renewer

    async def _renew(self) -> None:
        while True:
            await self.sleep(self.lease.total_seconds() / 3)
            now = self.clock()
            self.renewing = True
            try:
                renewed = await self.ledger.renew_lease(
                    self.record, now=now, lease_until=now + self.lease
                )
            except LedgerUnavailable as error:  # the next tick tries again
                log.warning("lease renewal of %s failed: %s", self.key.idempotency_key, error)
                continue
            finally:
                self.renewing = False
            if not renewed:
                if self._sending is None:  # after the call: finalized, or its fence decides
                    return
                self._outlived("renewal_refused")
                self.refused = True
                self._sending.cancel()
                return
            self.lease_until = now + self.lease

    def _outlived(self, reason: str) -> None:
        self.reported = True
        LEASES_OUTLIVED.labels(reason).inc()
        events.error(
            "lease_outlived",
            ledger_key=self.key.idempotency_key,
            error_class=reason,
            lease_until=self.lease_until.isoformat(),
        )
