"""The embedded queue's two statements per round on PostgreSQL, on the ledger's asyncpg pool.

A dispatcher round claims a batch (``queue_repo.CLAIM``) and, once the receiver has
answered, deletes the acknowledged messages. Through the engine each was a transaction:
a checkout ping, BEGIN, the statement and COMMIT, four round trips and SQLAlchemy's
layers, ~7% of a worker's CPU in a profile of 100,000 deliveries in process. Each is one
statement, so it runs in autocommit on the ledger's raw pool (``PgLedger.run_raw``: its
retries on a connection the server ended). A claim whose answer was lost with its
connection is run again; the messages it had claimed come back after their visibility
timeout, as when a dispatcher dies after its claim. A repeated delete removes nothing more.
Failures, releases and housekeeping stay on the engine: they are rare.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import BigInteger, any_, bindparam, delete
from sqlalchemy.dialects.postgresql import ARRAY

from .ledger import PgLedger
from .ledger.postgres_sql import RawStatement
from .queue_repo import CLAIM, ClaimedMessage, claimed_in_order
from .queue_tables import queue_messages

_CLAIM = RawStatement.compile(CLAIM)
_DELETE = RawStatement.compile(
    delete(queue_messages).where(
        queue_messages.c.id == any_(bindparam("ids", type_=ARRAY(BigInteger)))
    )
)

RunRaw = Callable[..., Awaitable[list[Any]]]


class PgQueueStatements:
    """A dispatcher's claim and acknowledgement as single autocommit statements."""

    def __init__(self, run_raw: RunRaw) -> None:
        self._run = run_raw

    async def claim(
        self, *, now: datetime, visible_until: datetime, limit: int
    ) -> list[ClaimedMessage]:
        """``queue_repo.claim_messages``, in one round trip."""
        args = _CLAIM.args(now=now, visible_until=visible_until, limit=limit)
        return claimed_in_order(await self._run(_CLAIM.sql, *args), payload=orjson.loads)

    async def delete(self, ids: Sequence[int]) -> None:
        """``queue_repo.delete_messages``, in one round trip."""
        if ids:
            await self._run(_DELETE.sql, *_DELETE.args(ids=list(ids)))


def queue_statements_for(ledger: object) -> PgQueueStatements | None:
    """The statements on the ledger's raw pool where it has one (PostgreSQL), else None."""
    return PgQueueStatements(ledger.run_raw) if isinstance(ledger, PgLedger) else None
