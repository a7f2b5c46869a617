"""Google Pub/Sub over its REST API (v1), through the service's shared HTTP pool.

With ``PUBSUB_EMULATOR_HOST`` (Google's own variable) set, requests go to
``http://{host}/v1`` without credentials, as Google's client libraries do. Otherwise they
go to ``https://pubsub.googleapis.com/v1`` with an access token from Google's default
credentials (google-auth), refreshed in a worker thread when it expires.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from app.adapters.channels.http import SharedHttp, client_timeout, read_capped

GOOGLE_PUBSUB_URL = "https://pubsub.googleapis.com/v1"
PUBSUB_SCOPE = "https://www.googleapis.com/auth/pubsub"
REQUEST_TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 1024 * 1024


class PubSubApiError(Exception):
    """Pub/Sub answered with an error status (or could not be reached: ``status`` 0)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"Pub/Sub answered {status}: {detail}")
        self.status = status


class GoogleAccessToken:
    """Authorization headers from Google's default credentials (none for the emulator)."""

    def __init__(self) -> None:
        self._credentials: Any = None

    async def headers(self) -> dict[str, str]:
        """``Authorization: Bearer …`` with a token that is valid now."""
        import google.auth
        from google.auth.transport.requests import Request

        if self._credentials is None:
            self._credentials, _ = await asyncio.to_thread(
                google.auth.default, scopes=[PUBSUB_SCOPE]
            )
        if not self._credentials.valid:
            await asyncio.to_thread(self._credentials.refresh, Request())
        return {"Authorization": f"Bearer {self._credentials.token}"}


class PubSubApi:
    """The few Pub/Sub REST calls we make: publish, and topics/subscriptions for setup."""

    def __init__(self, project: str, http: SharedHttp, *, emulator_host: str | None = None) -> None:
        self.project = project
        self._http = http
        self._base = f"http://{emulator_host}/v1" if emulator_host else GOOGLE_PUBSUB_URL
        self._token = None if emulator_host else GoogleAccessToken()

    def topic_path(self, topic: str) -> str:
        """A topic's resource name in our project."""
        return f"projects/{self.project}/topics/{topic}"

    def subscription_path(self, subscription: str) -> str:
        """A subscription's resource name in our project."""
        return f"projects/{self.project}/subscriptions/{subscription}"

    async def publish(self, topic: str, messages: list[dict[str, Any]]) -> list[str]:
        """Publish ``messages`` (``data`` base64, ``attributes``) to ``topic``; their ids."""
        answer = await self.call(
            "POST", f"{self.topic_path(topic)}:publish", {"messages": messages}
        )
        ids = answer.get("messageIds")
        if not isinstance(ids, list) or len(ids) != len(messages):
            raise PubSubApiError(200, "publish answer without one message id per message")
        return [str(message_id) for message_id in ids]

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One REST call; the decoded JSON answer, ``PubSubApiError`` on any failure."""
        headers = {"Content-Type": "application/json"}
        if self._token is not None:
            headers |= await self._token.headers()
        data = orjson.dumps(body) if body is not None else None
        try:
            async with self._http.session().request(
                method,
                f"{self._base}/{path}",
                data=data,
                headers=headers,
                timeout=client_timeout(REQUEST_TIMEOUT_SECONDS),
            ) as response:
                raw = await read_capped(response, MAX_ANSWER_BYTES)
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise PubSubApiError(0, type(error).__name__) from error
        if status >= 300:
            raise PubSubApiError(status, raw[:300].decode(errors="replace"))
        return orjson.loads(raw) if raw.strip() else {}
