"""Upstash QStash publisher: ``POST /v2/publish/<our push URL>`` per message.

Headers as Upstash documents them: ``Authorization: Bearer <QSTASH_TOKEN>``,
``Upstash-Not-Before`` (unix seconds, rounded up so a message is never early),
``Upstash-Deduplication-Id`` = our idempotency key (a duplicate is answered 202 with the
first message's id), ``Upstash-Retries``. The body is our payload as JSON, which QStash
pushes unchanged. The delay ceiling is the plan's (``REMINDERS_QSTASH_MAX_DELAY_SECONDS``).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from datetime import datetime

import aiohttp
import orjson
from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp, client_timeout, read_capped
from app.domain.clock import utc_now
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

_CONCURRENCY = 8  # publishes in flight per batch


class QStashPublisher:
    """Publishes each message to QStash, addressed to our push route for its queue."""

    name = "qstash"

    def __init__(
        self,
        http: SharedHttp,
        *,
        base_url: str,
        token: SecretStr,
        push_url_for: Callable[[str], str],
        retries: int = 3,
        max_delay_seconds: float,
        timeout_seconds: float = 10.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._push_url_for = push_url_for
        self._retries = retries
        self._timeout = timeout_seconds
        self.max_delay_seconds = max_delay_seconds
        self._clock = clock

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; QStash's message id (the first one for a repeated key)."""
        check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        url = f"{self._base_url}/v2/publish/{self._push_url_for(message.queue)}"
        try:
            async with self._http.session().post(
                url,
                data=_body(message),
                headers=self._headers(message),
                timeout=client_timeout(self._timeout),
            ) as response:
                status, answer = response.status, await read_capped(response)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise PublishError(f"QStash publish failed: {type(error).__name__}") from error
        if status not in (200, 201, 202):  # 202: a duplicate id, answered with the first one
            raise PublishError(f"QStash answered {status}: {answer[:200]!r}")
        message_id = _message_id(answer)
        if message_id is None:
            raise PublishError("QStash answered without a messageId")
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message first, then publish them (bounded concurrency); ids in order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        gate = asyncio.Semaphore(_CONCURRENCY)

        async def one(message: OutgoingMessage) -> str:
            async with gate:
                return await self.publish(message)

        return list(await asyncio.gather(*(one(message) for message in messages)))

    def _headers(self, message: OutgoingMessage) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._token.get_secret_value()}",
            "Content-Type": "application/json",
            "Upstash-Method": "POST",
            "Upstash-Deduplication-Id": message.idempotency_key,
            "Upstash-Retries": str(self._retries),
        }
        if message.delay_seconds > 0:
            due = self._clock().timestamp() + message.delay_seconds
            headers["Upstash-Not-Before"] = str(math.ceil(due))
        return headers


def _body(message: OutgoingMessage) -> bytes:
    return json.dumps(message.payload, separators=(",", ":")).encode()


def _message_id(raw: bytes) -> str | None:
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(answer, list) and answer:  # a URL group answers one entry per endpoint
        answer = answer[0]
    message_id = answer.get("messageId") if isinstance(answer, dict) else None
    return message_id if isinstance(message_id, str) and message_id else None
