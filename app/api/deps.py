"""Dependencies: the service container, connections per request, and the credential checks."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncConnection

from app.container import Container
from app.domain.errors import PayloadTooLarge, TooManyFailedAttempts, Unauthenticated
from app.observability.metrics import record_auth_failure, record_auth_throttled

log = logging.getLogger("reminders.auth")


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


def client_address(request: Request) -> str:
    """The client's address (the real one behind a trusted proxy: uvicorn's proxy headers)."""
    return request.client.host if request.client else "unknown"


def refuse_if_throttled(request: Request, container: Container, credential: str) -> None:
    """429 before any comparison when this client failed too many checks lately."""
    wait = container.auth_throttle.blocked(client_address(request))
    if wait is not None:
        record_auth_throttled(credential)
        raise TooManyFailedAttempts(wait)


def failed_check(
    request: Request, container: Container, credential: str, message: str
) -> Unauthenticated | TooManyFailedAttempts:
    """Count, log (never the value tried) and answer a failed check: 401, or 429 over budget."""
    client = client_address(request)
    wait = container.auth_throttle.failed(client)
    log.warning("%s check failed from %s on %s", credential, client, request.url.path)
    record_auth_failure(credential, throttled=wait is not None)
    return Unauthenticated(message) if wait is None else TooManyFailedAttempts(wait)


def check_bearer(request: Request, container: Container, name: str) -> None:
    """Let the request through when it carries the ``name`` token; else 401 or 429."""
    refuse_if_throttled(request, container, name)
    if not token_matches(bearer_token(request), getattr(container.settings, name)):
        message = f"a valid bearer token ({name.upper()}) is required"
        raise failed_check(request, container, name, message)


def _require(name: str) -> Callable[[Request, Container], None]:
    def check(request: Request, container: ContainerDep) -> None:
        check_bearer(request, container, name)

    # FastAPI reads a body before it solves dependencies: app/api/guard.py runs the routes'
    # credential checks (these) before any byte of the body is read.
    check.before_body = True  # type: ignore[attr-defined]
    return check


require_api_token = _require("api_token")
require_admin_token = _require("admin_token")
