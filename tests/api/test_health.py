"""/healthz answers without I/O; /readyz checks the database and schema within a short bound."""

import asyncio
import dataclasses
import socket
import time

import httpx
from sqlalchemy import text

from app.db.engine import create_engine
from app.main import create_app


async def _get(container, path: str) -> httpx.Response:
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        return await http.get(path)


async def test_ready_when_the_schema_is_at_head(client):
    """A migrated database answers 200 with its revisions."""
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


async def test_not_ready_while_migrations_are_pending(client, container):
    """A schema behind the migrations' head answers 503 naming both."""
    async with container.engine.begin() as conn:
        heads = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars()
        saved = list(heads)
        await conn.execute(text("DELETE FROM alembic_version"))
        await conn.execute(text("INSERT INTO alembic_version VALUES ('0001')"))
    try:
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.json()["status"] == "migrations_pending"
        assert response.json()["reason"].endswith("run `reminders migrate`")
    finally:
        async with container.engine.begin() as conn:
            await conn.execute(text("DELETE FROM alembic_version"))
            for head in saved:
                await conn.execute(text("INSERT INTO alembic_version VALUES (:v)"), {"v": head})


async def test_a_silent_database_gives_503_within_the_timeout(container, settings):
    """A database that accepts connections but never answers: 503 after the short bound."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts into the backlog, never speaks
    port = silent.getsockname()[1]
    url = f"postgresql+asyncpg://nobody@127.0.0.1:{port}/nothing"
    engine = create_engine(url)
    quick = settings.model_copy(update={"readyz_timeout_seconds": 0.5})
    stalled = dataclasses.replace(container, readiness_engine=engine, settings=quick)
    started = time.monotonic()
    try:
        response = await _get(stalled, "/readyz")
    finally:
        silent.close()
        await asyncio.wait_for(engine.dispose(), 5)
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["reason"].startswith("the database at 127.0.0.1:")
    assert "did not answer within 0.5 s" in response.json()["reason"]
    assert time.monotonic() - started < 5
    assert (await _get(stalled, "/healthz")).status_code == 200


async def test_head_probes_get_the_same_status_without_a_body(client, container):
    """HEAD /healthz and HEAD /readyz answer as GET does (200, then 503 when not ready)."""
    for path in ("/healthz", "/readyz"):
        response = await client.head(path)
        assert (response.status_code, response.content) == (200, b"")
    async with container.engine.begin() as conn:
        saved = list(
            (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars()
        )
        await conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    try:
        assert (await client.head("/readyz")).status_code == 503
    finally:
        async with container.engine.begin() as conn:
            await conn.execute(text("DELETE FROM alembic_version"))
            for head in saved:
                await conn.execute(text("INSERT INTO alembic_version VALUES (:v)"), {"v": head})
