"""A finalize that must not be lost to a dropped database connection.

Once the provider has accepted a message, the finalize is the only record that it was
sent. Dropping it on a failed connection left the row ``sending``; the queue's redelivery
reclaimed it after the lease and sent the message a second time (19 webhooks twice in six
rounds of ``pg_terminate_backend``). So the finalize is retried with capped exponential
backoff for as long as the lease it holds lasts (``until``): until then no other worker can
take the row, so a finalize that lands in time is the only record. A fixed budget shorter
than the lease gave up while the lease still protected the row (a 35 s outage with the
default 60 s lease sent 16 messages twice). The receiver runs it shielded from outer
timeouts (``receive``), so no caller's deadline cuts it short either.

A retried finalize may find its own earlier attempt committed (the connection dropped
after the commit, before the answer): the fence then refuses it, and the row, read back,
shows this attempt's result; that is success, not a lost lease.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.errors import LeaseLost, LedgerUnavailable
from app.domain.ledger import LedgerKey, SendRecordView
from app.domain.messages import ReminderView
from app.domain.ports import LedgerGateway

log = logging.getLogger("reminders.receiver")

FIRST_DELAY_SECONDS = 0.05
MAX_DELAY_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class FinalizeRetry:
    """What a retried finalize needs: the ledger, the clock, a sleep and the lease's end."""

    ledger: LedgerGateway
    clock: Callable[[], datetime]
    sleep: Callable[[float], Awaitable[None]]
    # The lease this attempt holds ends then: the retries stop there (at least one retry).
    until: datetime

    @property
    def budget_seconds(self) -> float:
        """Seconds left to retry in, measured once when the finalize starts."""
        return max(FIRST_DELAY_SECONDS, (self.until - self.clock()).total_seconds())


async def finalize_durably(
    retry: FinalizeRetry,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    values: Mapping[str, Any],
    finalize: Callable[[], Awaitable[None]],
) -> None:
    """Run ``finalize``, retrying while the database is unreachable (bounded)."""
    delay, waited, retried = FIRST_DELAY_SECONDS, 0.0, False
    budget = retry.budget_seconds  # waits are summed, so an injected sleep ends it too
    name = key.idempotency_key
    while True:
        try:
            await finalize()
            return
        except LedgerUnavailable as error:
            if waited >= budget or (retried and retry.clock() >= retry.until):
                log.error("finalize of %s gave up after %.1fs: %s", name, waited, error)
                raise
            log.warning("finalize of %s: %s; retry in %.2fs", name, error, delay)
        except LeaseLost:
            if retried and await _committed_before(retry, key, record, values):
                await retry.ledger.settle_if_final(reminder, values, now=retry.clock())
                return
            raise
        await retry.sleep(delay)
        waited += delay
        delay = min(delay * 2, MAX_DELAY_SECONDS)
        retried = True


async def _committed_before(
    retry: FinalizeRetry, key: LedgerKey, record: SendRecordView, values: Mapping[str, Any]
) -> bool:
    # Our attempt's result is in the row: same attempt, the state we wrote.
    row = await retry.ledger.get_send_record(key)
    return (
        row is not None
        and row.attempt_count == record.attempt_count
        and row.state.value == values["state"]
    )
