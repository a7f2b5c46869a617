"""Credentials before bodies; every body capped while streaming and read within a deadline.

Before: 300 concurrent large bodies to ``POST /admin/login`` or an unauthenticated
``PUT /v1/customers/x`` grew the process by 0.6-1.3 GB (FastAPI reads a body before it runs
the route's credential check), and the PUT answered 422 instead of 401. These tests drive
the app through raw ASGI with a receive that counts what the app took from the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import httpx
import pytest

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.container import open_container
from app.main import create_app
from tests.conftest import make_settings
from tests.support.flow import API
from tests.support.push import envelope, signed

pytestmark = pytest.mark.anyio

CHUNK = 64 * 1024
HUGE_CHUNKS = 160  # 10 MiB, never sent whole: the app must stop taking chunks long before


@dataclasses.dataclass
class Stream:
    """An ASGI receive that hands out ``chunks`` body chunks and counts those taken."""

    chunks: int
    chunk: bytes = b"x" * CHUNK
    taken: int = 0
    stall_after: int | None = None  # stop sending (a trickling client) after this many

    async def __call__(self) -> dict[str, Any]:
        if self.stall_after is not None and self.taken >= self.stall_after:
            await asyncio.Event().wait()  # never arrives
        if self.taken >= self.chunks:
            return {"type": "http.disconnect"}
        self.taken += 1
        return {"type": "http.request", "body": self.chunk, "more_body": self.taken < self.chunks}


async def call(app, method: str, path: str, stream: Stream, headers: dict[str, str]) -> int:
    """Serve one request through the whole ASGI stack; the response status."""
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(name.lower().encode(), value.encode()) for name, value in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    await app(scope, stream, send)
    assert len(statuses) == 1, statuses
    return statuses[0]


@pytest.fixture
def app(container):
    built = create_app(container=container)
    built.state.container = container
    return built


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/v1/customers/x"),
        ("PUT", "/v1/reminders/r1"),
        ("PUT", "/v1/schedules/s1"),
        ("POST", "/v1/dead-letters/redrive"),
    ],
)
async def test_an_unauthenticated_body_is_refused_before_a_byte_is_read(app, method, path):
    """401, not 422, and the app took nothing from the stream."""
    stream = Stream(HUGE_CHUNKS)
    assert await call(app, method, path, stream, JSON) == 401
    assert stream.taken == 0


async def test_an_authenticated_body_is_capped_while_streaming(app):
    """A 10 MiB body without Content-Length: 413 after at most the cap's worth of chunks."""
    stream = Stream(HUGE_CHUNKS)
    assert await call(app, "PUT", "/v1/customers/x", stream, {**JSON, **API}) == 413
    assert stream.taken <= 2  # 64 KiB cap: the second chunk passes it


async def test_a_declared_length_over_the_cap_is_refused_unread(app):
    """Content-Length over the cap: 413 without reading."""
    stream = Stream(HUGE_CHUNKS)
    headers = {**JSON, **API, "content-length": str(HUGE_CHUNKS * CHUNK)}
    assert await call(app, "PUT", "/v1/customers/x", stream, headers) == 413
    assert stream.taken == 0


async def test_the_admin_login_form_is_capped_while_streaming(app):
    """The login form (no credential before its body) stops at its 8 KiB cap."""
    stream = Stream(HUGE_CHUNKS)
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert await call(app, "POST", "/admin/login", stream, form) == 413
    assert stream.taken == 1


async def test_the_push_route_keeps_its_own_larger_cap(app):
    """A push body within the push cap is read; one past it gets 413 early."""
    stream = Stream(HUGE_CHUNKS)
    assert await call(app, "POST", "/push/reminders", stream, JSON) == 413
    assert stream.taken <= 5  # 272 KiB cap in 64 KiB chunks


async def test_a_trickling_body_gets_408(app, container):
    """A body that stops arriving is answered 408 after the read timeout."""
    container.settings = container.settings.model_copy(update={"body_read_timeout_seconds": 0.05})
    stream = Stream(3, chunk=b" ", stall_after=1)
    started = time.monotonic()
    assert await call(app, "PUT", "/v1/customers/x", stream, {**JSON, **API}) == 408
    assert time.monotonic() - started < 5


async def test_a_trickling_push_body_gets_408(app, container):
    """The push route's body is held to the same deadline (its own entry, push_entry.py)."""
    container.settings = container.settings.model_copy(update={"body_read_timeout_seconds": 0.05})
    stream = Stream(3, chunk=b" ", stall_after=1)
    started = time.monotonic()
    assert await call(app, "POST", "/push/reminders", stream, JSON) == 408
    assert time.monotonic() - started < 5


async def test_a_push_without_a_timestamp_is_refused_when_one_is_required(
    clean_database_url, tmp_path
):
    """REMINDERS_PUSH_REQUIRE_TIMESTAMP: an untimestamped signature is 401, a fresh one is
    authenticated (and then rejected as an unknown reminder: 200)."""
    settings = make_settings(clean_database_url, tmp_path, push_require_timestamp=True)
    async with open_container(settings, publisher=MemoryPublisher()) as container:
        app = create_app(container=container)
        app.state.container = container
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            raw, headers = signed(envelope("r1"))
            refused = await client.post("/push/reminders", content=raw, headers=headers)
            assert refused.status_code == 401
            raw, headers = signed(envelope("r1"), timestamp=int(time.time()))
            accepted = await client.post("/push/reminders", content=raw, headers=headers)
            assert accepted.status_code == 200, accepted.text
