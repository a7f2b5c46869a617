"""Dependencies: the service container, connections per request, and the credential checks."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import Depends, Request
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncConnection

from app.container import Container
from app.domain.errors import PayloadTooLarge, Unauthenticated


async def read_capped(request: Request, limit: int) -> bytes:
    """The raw body, refusing more than ``limit`` bytes before reading it all."""
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and (len(declared) > len(str(limit)) or int(declared) > limit)
    ):
        raise PayloadTooLarge(f"body over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body over {limit} bytes")
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

    return check


require_api_token = _require("api_token")
require_admin_token = _require("admin_token")
