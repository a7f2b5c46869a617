"""Drive sends into the dead-letter set through the real HTTP routes."""

from __future__ import annotations

from typing import Any

import httpx

from app.adapters.queues.memory.publisher import MemoryPublisher, PublishedMessage
from app.domain.errors import PermanentProviderError, TransientProviderError
from tests.support.clock import FakeClock
from tests.support.flow import push_message, put_customer, put_reminder, sweep
from tests.support.providers import ScriptedProvider

ADMIN_TOKEN = "test-admin-token-c4a8e2f6b0d3917a5e2c4b"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def publish_reminder(
    client: httpx.AsyncClient, publisher: MemoryPublisher, clock: FakeClock, reminder_id: str
) -> PublishedMessage:
    """Register a customer and a reminder due now, sweep, and return its queue message."""
    customer_id = "cust_" + reminder_id.replace(":", "_")
    await put_customer(client, customer_id)
    await put_reminder(client, reminder_id, customer_id=customer_id, due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    return message


async def exhaust(
    client: httpx.AsyncClient,
    publisher: MemoryPublisher,
    clock: FakeClock,
    provider: ScriptedProvider,
    reminder_id: str,
    *,
    attempts: int = 3,
) -> dict[str, Any]:
    """Fail every attempt transiently until the send is dead; the last push answer."""
    message = await publish_reminder(client, publisher, clock, reminder_id)
    provider.script.extend(
        TransientProviderError("smtp 451", detail_class="smtp_4xx") for _ in range(attempts)
    )
    answer: dict[str, Any] = {}
    for attempt in range(attempts):
        if attempt:
            clock.advance(hours=2)  # past any backoff
        answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "dead_lettered", answer
    return answer


async def fail_permanently(
    client: httpx.AsyncClient,
    publisher: MemoryPublisher,
    clock: FakeClock,
    provider: ScriptedProvider,
    reminder_id: str,
) -> dict[str, Any]:
    """One permanent provider failure: the send becomes a terminal failure."""
    message = await publish_reminder(client, publisher, clock, reminder_id)
    provider.script.append(PermanentProviderError("550 no such user", detail_class="smtp_5xx"))
    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "terminal", answer
    return answer


async def admin_get(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    """GET an operator route; asserts 200."""
    response = await client.get(path, params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()


async def admin_post(
    client: httpx.AsyncClient, path: str, json: Any = None, **params: Any
) -> dict[str, Any]:
    """POST an operator route; asserts 200."""
    response = await client.post(path, json=json, params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()
