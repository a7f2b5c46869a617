"""Dependencies: the service container, connections per request, and the credential checks."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncConnection

from app.container import Container
from app.domain.errors import PayloadTooLarge, Unauthenticated


@dataclass
class BodyLimit:
    """One rule for every body reader: more than ``limit`` bytes, declared or streamed, is
    ``PayloadTooLarge`` before the excess is kept anywhere."""

    limit: int
    seen: int = 0

    def check_declared(self, content_length: str | None) -> None:
        """Refuse a Content-Length over the limit without reading anything."""
        if content_length is None or not (content_length.isascii() and content_length.isdigit()):
            return
        if len(content_length) > len(str(self.limit)) or int(content_length) > self.limit:
            raise PayloadTooLarge(f"body over {self.limit} bytes")

    def add(self, size: int) -> None:
        """Count a received chunk; refuse once the total passes the limit."""
        self.seen += size
        if self.seen > self.limit:
            raise PayloadTooLarge(f"body over {self.limit} bytes")


async def read_capped(request: Request, limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes before reading it all."""
    body_limit = BodyLimit(limit)
    body_limit.check_declared(request.headers.get("content-length"))
    chunks = []
    async for chunk in request.stream():
        body_limit.add(len(chunk))
        chunks.append(chunk)
    return b"".join(chunks)


def get_container(request: Request) -> Container:
    """The container built by the app's lifespan."""
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


async def transaction(container: ContainerDep) -> AsyncIterator[AsyncConnection]:
    """One transaction per request: committed when the route returns, rolled back on error."""
    async with container.engine.begin() as conn:
        yield conn


# scope="function": commit before the response is sent. With FastAPI's default ("request")
# the commit ran after the client had its 200, so a follow-up request could miss the row
# (seen on PostgreSQL), and a failed commit would still have answered 200.
ConnectionDep = Annotated[AsyncConnection, Depends(transaction, scope="function")]


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def token_matches(provided: str | None, expected: SecretStr) -> bool:
    """Constant-time comparison against a configured secret."""
    secret = expected.get_secret_value()
    if not provided or not secret:
        return False
    return hmac.compare_digest(provided.encode(), secret.encode())


def _require(name: str) -> Callable[[Request, Container], None]:
    def check(request: Request, container: ContainerDep) -> None:
        if not token_matches(bearer_token(request), getattr(container.settings, name)):
            raise Unauthenticated(f"a valid bearer token ({name.upper()}) is required")

    # FastAPI reads a body before it solves dependencies: app/api/guard.py runs the routes'
    # credential checks (these) before any byte of the body is read.
    check.before_body = True  # type: ignore[attr-defined]
    return check


require_api_token = _require("api_token")
require_admin_token = _require("admin_token")
