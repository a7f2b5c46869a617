"""The queue-publisher contract, run against the embedded queue on the test database.

The contract's tests live with the reference factories in
``test_infrai_publisher_contract.py`` (until a shared ``tests/contract/publishers.py``
exists); they are imported here and run with this module's ``harness``: the embedded
publisher, and a reader of the ``queue_messages`` table.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.adapters.queues.embedded import EmbeddedQueuePublisher
from app.db import queue_repo
from app.db.engine import create_engine
from tests.contract.test_infrai_publisher_contract import (
    PublisherHarness,
    test_batch_ids_come_back_in_order,
    test_oversized_payloads_and_missing_keys_are_refused,
    test_publish_stores_the_payload_with_its_delay,
    test_the_delay_horizon_is_seven_days,
    test_the_same_idempotency_key_returns_the_same_id,
)

pytestmark = pytest.mark.anyio

__all__ = [
    "test_batch_ids_come_back_in_order",
    "test_oversized_payloads_and_missing_keys_are_refused",
    "test_publish_stores_the_payload_with_its_delay",
    "test_the_delay_horizon_is_seven_days",
    "test_the_same_idempotency_key_returns_the_same_id",
]


def read_stored(database_url: str) -> list[tuple[str, dict[str, Any], float]]:
    """What the table holds, read on a thread with its own loop (the harness is synchronous)."""

    async def read() -> list[tuple[str, dict[str, Any], float]]:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                rows = await queue_repo.list_messages(conn, limit=1000)
        finally:
            await engine.dispose()
        return [
            (r["message_id"], r["payload"], (r["visible_at"] - r["created_at"]).total_seconds())
            for r in rows
        ]

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


@pytest.fixture
async def harness(clean_database_url: str, clock) -> AsyncIterator[PublisherHarness]:
    engine = create_engine(clean_database_url)
    yield PublisherHarness(
        EmbeddedQueuePublisher(engine, clock=clock), lambda: read_stored(clean_database_url)
    )
    await engine.dispose()
