"""On PostgreSQL ``reminders serve`` claims on the ledger's raw pool (``app/db/queue_pg.py``),
whose sessions keep one generic plan per statement, made once for whatever the estimates
said then. That plan must walk the claim's index in its order and stop at the batch: a
generic plan of the claim that read every waiting message through a bitmap and sorted
them, for every claim, is what undid the first move of the claim to this pool."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.db.ledger import PgLedger, ledger_for
from app.db.queue_claim import INDEX_ORDER_ONLY
from app.db.queue_pg import _CLAIMS
from tests.integration.test_queue_claim_position import messages

pytestmark = pytest.mark.anyio


def _literal(value: object) -> str:
    shown = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + shown.replace("'", "''") + "'"


async def generic_plan(ledger: PgLedger, *, after: bool, now: datetime, index_order: bool):
    """The plan a session of the ledger's pool runs the claim with (EXPLAIN of a prepared
    statement under the pool's ``plan_cache_mode``: generic), in the claim's transaction."""
    statement = _CLAIMS[after]
    values = {"now": now, "visible_until": now + timedelta(minutes=2), "limit": 64,
              "after_at": now - timedelta(seconds=1), "after_id": 10}  # fmt: skip
    arguments = ", ".join(_literal(value) for value in statement.args(**values))

    async def explain(conn):
        # Estimates that price the index walk above a bitmap and a sort (as those of a
        # queue planned nearly empty did): the claim's transaction must walk it anyway.
        await conn.execute("SET LOCAL enable_indexscan = off")
        if index_order:
            await conn.execute(INDEX_ORDER_ONLY)
        await conn.execute(f"PREPARE claim AS {statement.sql}")
        [[plan]] = await conn.fetch(f"EXPLAIN (FORMAT JSON) EXECUTE claim({arguments})")
        await conn.execute("DEALLOCATE claim")
        return json.loads(plan)[0]["Plan"]

    return await ledger.run_transaction(explain)


def _nodes(node: dict, kind: str) -> list[dict]:
    found = [node] if node["Node Type"] == kind else []
    for child in node.get("Plans", []):
        found.extend(_nodes(child, kind))
    return found


@pytest.mark.parametrize("after", [False, True], ids=["from-start", "from-position"])
async def test_the_raw_claims_generic_plan_walks_the_index(engine, clock, db_backend, after):
    """Planned on an empty queue and on one of 3,000 messages sharing one ``visible_at`` (a
    sweep's batch, no statistics yet), with the index walk priced out (``enable_indexscan``
    off, standing in for estimates that favour a bitmap): neither plan sorts or reads
    through a bitmap. Without the claim transaction's settings both did."""
    if db_backend != "postgresql":
        pytest.skip("the raw pool is PostgreSQL's")
    ledger = ledger_for(engine, raw_connections=2)
    assert isinstance(ledger, PgLedger)
    try:
        empty = await generic_plan(ledger, after=after, now=clock.now, index_order=True)
        publisher = EmbeddedQueuePublisher(engine, max_retries=5, clock=clock)
        await publisher.publish_batch(messages(0, 3000))
        full = await generic_plan(ledger, after=after, now=clock.now, index_order=True)
    finally:
        await ledger.close()
    for plan in (empty, full):
        assert not _nodes(plan, "Sort") and not _nodes(plan, "Bitmap Heap Scan"), plan
        assert _nodes(plan, "Index Scan"), plan
