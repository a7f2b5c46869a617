"""Build signed Infrai push requests the way the queue sends them."""

from __future__ import annotations

from typing import Any

import orjson

from app.adapters.queues.infrai.push_format import sign

PUSH_SECRET = "test-push-secret-current-1d9f3b7e5a2c6048"
NEXT_PUSH_SECRET = "test-push-secret-next-8e6c4a2f0b9d7e3153"


def envelope(
    reminder_id: str,
    channel: str = "email",
    version: int = 1,
    *,
    message_id: str = "msg-1",
    **extra: Any,
) -> dict[str, Any]:
    """An Infrai push envelope carrying our payload."""
    payload = {"v": 1, "reminder_id": reminder_id, "channel": channel, "schedule_version": version}
    return {"message_id": message_id, "payload": payload, **extra}


def signed(
    body: dict[str, Any] | bytes,
    *,
    secret: str = PUSH_SECRET,
    timestamp: int | None = None,
) -> tuple[bytes, dict[str, str]]:
    """Raw bytes and headers for a push signed with ``secret``."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {
        "content-type": "application/json",
        "X-Infrai-Signature": sign(secret.encode(), raw, timestamp),
    }
    if timestamp is not None:
        headers["X-Infrai-Timestamp"] = str(timestamp)
    return raw, headers
