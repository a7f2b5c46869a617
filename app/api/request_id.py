"""The request id: taken from a sane ``X-Request-ID`` or generated, bound to every log line."""

from __future__ import annotations

import re
import uuid
from typing import Any

import structlog

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


class RequestIdMiddleware:
    """Pure ASGI: take a sane ``X-Request-ID`` or make one, bind it to every log line of the
    request, and echo it in the response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one ASGI connection with its request id bound."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope["headers"]) or uuid.uuid4().hex
        header = (b"x-request-id", request_id.encode())

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)


def _incoming_id(headers: list[tuple[bytes, bytes]]) -> str | None:
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _REQUEST_ID.match(text) else None
    return None
