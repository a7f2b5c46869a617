"""A real HTTP server on loopback standing in for the receiver: it checks signatures with
the production verifier, records each push, and answers from a script."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from app.adapters.queues.infrai.push_format import InfraiPushFormat
from app.domain.errors import Unauthenticated
from tests.support.loopback import serve
from tests.support.push import PUSH_SECRET


@dataclass
class Answer:
    """One scripted answer."""

    status: int = 200
    retry_after: str | None = None
    outcome: str = "sent"


@dataclass
class ReceivedPush:
    """One push as the server saw it."""

    queue: str
    envelope: dict[str, Any]
    authentic: bool


@dataclass
class PushServer:
    """Answers ``POST /push/{queue}``; ``script`` is consumed in order, then 200 sent."""

    script: list[Answer] = field(default_factory=list)
    received: list[ReceivedPush] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        """The URL the dispatcher should push to."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        app = web.Application()
        app.router.add_post("/push/{queue}", self._handle)
        self._runner, self.port = await serve(app, port=self.port)

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        verifier = InfraiPushFormat([PUSH_SECRET.encode()])
        try:
            verifier.check_signature(body, request.headers, now=time.time())
            authentic = True
        except Unauthenticated:
            authentic = False
        self.received.append(
            ReceivedPush(request.match_info["queue"], orjson.loads(body), authentic)
        )
        if not authentic:
            return web.json_response({"error": "unauthenticated"}, status=401)
        answer = self.script.pop(0) if self.script else Answer()
        headers = {"Retry-After": answer.retry_after} if answer.retry_after else {}
        return web.json_response({"outcome": answer.outcome}, status=answer.status, headers=headers)
