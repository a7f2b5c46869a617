"""Every API request: its request id bound to every log line, and one access line.

The request id is taken from a sane ``X-Request-ID`` or generated, and echoed in the
response. The access line (logger ``reminders.access``, event ``request``) has the method,
the route *template* (``/v1/reminders/{reminder_id}``, never the path itself: paths carry
ids and unsubscribe tokens), the status, the duration and the request id — never headers,
tokens or bodies. A route that logs its own line per request says so in the scope (the
push route's delivery line carries the same fields), so each request gets one line.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import structlog

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
# Set in the ASGI scope by a route that wrote its own request line.
LOGGED = "reminders.request_logged"
log = structlog.get_logger("reminders.access")


class RequestLogMiddleware:
    """Pure ASGI: bind a request id to every log line, echo it, write one access line."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI connection with its request id bound, then log it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _incoming_id(scope["headers"]) or uuid.uuid4().hex
        header = (b"x-request-id", request_id.encode())
        status = 500  # what the client sees when the app fails before answering

        async def send_with_id(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if not scope.get(LOGGED):
                log.info(
                    "request",
                    method=scope["method"],
                    route=route_template(scope),
                    status=status,
                    duration_ms=round((time.perf_counter() - started) * 1000, 3),
                )
            structlog.contextvars.reset_contextvars(**tokens)


def route_template(scope: dict[str, Any]) -> str | None:
    """The matched route's path template, or None when no route matched."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return scope.get("root_path", "") + path
    return None


def _incoming_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _REQUEST_ID.match(text) else None
    return None
