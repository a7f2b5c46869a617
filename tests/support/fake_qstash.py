"""A QStash publish API on loopback, implementing the documented request format.

No offline QStash exists. This fake checks what Upstash documents for
``POST /v2/publish/<destination>``: the bearer token, ``Upstash-Not-Before`` as unix
seconds, ``Upstash-Deduplication-Id`` (a repeat inside the window answers 202 with the
first message's id), ``Upstash-Retries``; it answers 201 ``{"messageId": ...}`` and keeps
what it accepted for the test to inspect. Time comes from the test's clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aiohttp import web

from app.adapters.queues.qstash.settings import QStashSettings
from tests.support.clock import FakeClock
from tests.support.loopback import serve

TOKEN = "qstash-test-token"
FREE_PLAN_DELAY = QStashSettings().max_delay_seconds  # the setting's default: 7 days


@dataclass(frozen=True)
class Published:
    """One message QStash accepted."""

    message_id: str
    destination: str
    body: bytes
    headers: dict[str, str]
    published_at: datetime
    not_before: int | None

    @property
    def delay_seconds(self) -> float:
        if self.not_before is None:
            return 0.0
        return max(0.0, self.not_before - self.published_at.timestamp())


@dataclass
class FakeQStash:
    clock: FakeClock
    dedup_window: timedelta = timedelta(minutes=10)
    messages: list[Published] = field(default_factory=list)
    requests: int = 0
    port: int = 0
    _dedup: dict[str, Published] = field(default_factory=dict)
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v2/publish/{destination:.+}", self._publish)
        self._runner, self.port = await serve(app)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _publish(self, request: web.Request) -> web.Response:
        self.requests += 1
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        destination = request.match_info["destination"]
        if not destination.startswith(("http://", "https://")):
            return web.json_response({"error": "invalid destination url"}, status=400)
        not_before = request.headers.get("Upstash-Not-Before")
        if not_before is not None and not not_before.isdigit():
            return web.json_response({"error": "Upstash-Not-Before: unix seconds"}, status=400)
        now = self.clock()
        dedup_id = request.headers.get("Upstash-Deduplication-Id")
        earlier = self._dedup.get(dedup_id) if dedup_id else None
        if earlier is not None and now - earlier.published_at < self.dedup_window:
            return web.json_response(
                {"messageId": earlier.message_id, "deduplicated": True}, status=202
            )
        published = Published(
            f"msg_{uuid.uuid4().hex}", destination, await request.read(),
            dict(request.headers), now, int(not_before) if not_before else None,
        )  # fmt: skip
        self.messages.append(published)
        if dedup_id:
            self._dedup[dedup_id] = published
        return web.json_response({"messageId": published.message_id}, status=201)
