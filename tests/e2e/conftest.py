"""Fixtures of the end-to-end tests: a customer webhook endpoint, a ledger reader, cleanup."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import queue_repo, summary_repo
from app.db.engine import create_engine
from app.domain.clock import utc_now
from app.services.audit import run_audit
from tests.e2e.processes import Process
from tests.support.channel_servers import serve


@dataclass
class Endpoint:
    """A customer's webhook endpoint: scripted statuses first, then 200, each after ``delay``;
    a scripted 429 carries ``Retry-After: retry_after`` when that is set. Once ``hold_after``
    requests have been accepted, later ones hang until ``gate`` opens and then answer 503, so
    a test can stop a sender at a point it controls with requests in flight."""

    script: list[int] = field(default_factory=list)
    delay: float = 0.0
    retry_after: str = ""
    requests: list[str] = field(default_factory=list)  # webhook-id of every request
    accepted: Counter[str] = field(default_factory=Counter)  # 2xx answers per webhook-id
    hold_after: int | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0  # requests hanging at the gate now
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        return app

    async def _hook(self, request: web.Request) -> web.Response:
        await request.read()
        webhook_id = request.headers.get("webhook-id", "")
        self.requests.append(webhook_id)
        if self.hold_after is not None and sum(self.accepted.values()) >= self.hold_after:
            self.held += 1
            await self.gate.wait()
            self.held -= 1
            return web.Response(status=503, text="held, then refused")
        if self.delay:
            await asyncio.sleep(self.delay)
        status = self.script.pop(0) if self.script else 200
        if status < 300:
            self.accepted[webhook_id] += 1
        headers = {"Retry-After": self.retry_after} if status == 429 and self.retry_after else {}
        return web.Response(status=status, text="ok", headers=headers)


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    hook = Endpoint()
    async with serve(hook.app()) as base_url:
        hook.url = f"{base_url}/hook"
        yield hook


@dataclass
class Ledger:
    """Reads the ledger and the embedded queue of the test database."""

    engine: AsyncEngine

    async def rows(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            return await summary_repo.ledger_rows(conn)

    async def sent(self) -> int:
        return sum(1 for row in await self.rows() if row["state"] == "sent")

    async def queue(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            return await queue_repo.count_by_state(conn)

    async def queue_messages(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            return await queue_repo.list_messages(conn, limit=10_000)


@pytest.fixture(autouse=True)
async def audit_after(clean_database_url: str) -> AsyncIterator[None]:
    """After every end-to-end run, ``reminders audit`` passes on what it left behind."""
    yield
    engine = create_engine(clean_database_url)
    try:
        async with engine.connect() as conn:
            report = await run_audit(conn, now=utc_now())
    finally:
        await engine.dispose()
    assert report.ok, report.to_json()


@pytest.fixture
async def ledger(clean_database_url: str) -> AsyncIterator[Ledger]:
    engine = create_engine(clean_database_url)
    yield Ledger(engine)
    await engine.dispose()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """Every process a test starts is killed at teardown, whatever happened."""
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()
