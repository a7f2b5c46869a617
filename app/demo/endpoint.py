"""The demo's customer webhook endpoint: a real HTTP server on loopback that fails on purpose.

Each path has a behaviour: ``/ok`` accepts, ``/flaky`` answers 503 once and then 200,
``/reject`` answers 400 (a permanent failure), ``/down`` always answers 503. It counts the
deliveries it accepted per ``webhook-id`` (the ledger key), so a duplicate would show.
"""

from __future__ import annotations

import socket
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class WebhookEndpoint:
    """Serves the scripted paths on 127.0.0.1; ``accepted`` counts 2xx per webhook-id."""

    requests: Counter[str] = field(default_factory=Counter)
    accepted: Counter[str] = field(default_factory=Counter)
    port: int = 0
    _runner: web.AppRunner | None = None

    def url(self, path: str) -> str:
        """The URL of one scripted path."""
        return f"http://127.0.0.1:{self.port}/{path}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        app = web.Application()
        app.router.add_post("/{behaviour}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        behaviour = request.match_info["behaviour"]
        await request.read()
        self.requests[behaviour] += 1
        status = self._status(behaviour)
        if status < 300:
            self.accepted[request.headers.get("webhook-id", "?")] += 1
        return web.json_response({"status": status}, status=status)

    def _status(self, behaviour: str) -> int:
        if behaviour == "flaky":
            return 503 if self.requests[behaviour] == 1 else 200
        return {"ok": 200, "reject": 400, "down": 503}.get(behaviour, 404)
