"""Drive the service through its HTTP routes the way applications and the queue do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from app.adapters.queues.memory.publisher import MemoryPublisher, PublishedMessage
from tests.support.push import envelope, signed

API_TOKEN = "test-api-token-5f0c9a1e7b3d42c8a6e0f1"
CRON_TOKEN = "test-cron-token-9b2e4d6f8a0c1e3b5d7f90"
METRICS_TOKEN = "test-metrics-token-6a3f1c9e7d5b2a8f0e4c"
API = {"Authorization": f"Bearer {API_TOKEN}"}
METRICS = {"Authorization": f"Bearer {METRICS_TOKEN}"}
CRON = {"Authorization": f"Bearer {CRON_TOKEN}"}


async def put_customer(client: httpx.AsyncClient, customer_id: str, **fields: Any) -> dict:
    """Register a customer (an email address by default)."""
    body = {"email": f"{customer_id}@example.com", **fields}
    response = await client.put(f"/v1/customers/{customer_id}", json=body, headers=API)
    assert response.status_code == 200, response.text
    return response.json()


async def put_reminder(
    client: httpx.AsyncClient,
    reminder_id: str,
    *,
    customer_id: str,
    due_at: datetime,
    channels: tuple[str, ...] = ("email",),
    kind: str = "weekly_digest",
    expect: int | None = None,
    **fields: Any,
) -> dict:
    """Register or update a reminder."""
    body = {
        "customer_id": customer_id,
        "kind": kind,
        "due_at": due_at.isoformat(),
        "channels": list(channels),
        **fields,
    }
    response = await client.put(f"/v1/reminders/{reminder_id}", json=body, headers=API)
    if expect is not None:
        assert response.status_code == expect, response.text
    else:
        assert response.status_code in (200, 201), response.text
    return response.json()


async def scrape(client: httpx.AsyncClient, *, refresh: bool = True) -> str:
    """GET /metrics as Prometheus does; first (``refresh``) the background task's one
    reading of the ledger, which ASGI tests without a lifespan must run themselves."""
    if refresh:
        await client._transport.app.state.container.ledger_metrics.refresh()  # type: ignore[attr-defined]
    response = await client.get("/metrics", headers=METRICS)
    assert response.status_code == 200, response.text
    return response.text


async def sweep(client: httpx.AsyncClient) -> dict:
    """Run the cron sweep over HTTP."""
    response = await client.post("/cron/sweep", headers=CRON)
    assert response.status_code == 200, response.text
    return response.json()


async def push(
    client: httpx.AsyncClient, body: dict[str, Any], *, queue: str = "reminders", **sign: Any
) -> httpx.Response:
    """Deliver one signed push to the receiver."""
    raw, headers = signed(body, **sign)
    return await client.post(f"/push/{queue}", content=raw, headers=headers)


async def push_message(client: httpx.AsyncClient, message: PublishedMessage) -> httpx.Response:
    """Deliver a message the in-memory queue holds, as the managed queue would."""
    return await push(
        client, {"message_id": message.message_id, "payload": message.payload}, queue=message.queue
    )


async def deliver_all(client: httpx.AsyncClient, publisher: MemoryPublisher) -> list[dict]:
    """Push every published message once; the answers' JSON bodies in order."""
    return [(await push_message(client, m)).json() for m in publisher.drain()]


async def get_reminder(client: httpx.AsyncClient, reminder_id: str) -> dict:
    """A reminder with its send records."""
    response = await client.get(f"/v1/reminders/{reminder_id}", headers=API)
    assert response.status_code == 200, response.text
    return response.json()


__all__ = ["envelope"]
