"""Database events never cause a second send (issue 19, point 1).

The database's "not now" answers are recognised by code on both drivers; a delivery
answered while the database is unreachable is a 503 with Retry-After, never a 500; the
work on a claim (send, then finalize) is not cut short by any caller's timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta

import asyncpg
import httpx
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from app.container import build_container
from app.db.failures import is_unavailable
from app.domain.messages import Delivery
from app.main import create_app
from app.services.receive import receive_delivery
from tests.conftest import make_settings
from tests.integration.test_leases import message, the_row
from tests.support.channel_servers import free_port
from tests.support.flow import push
from tests.support.providers import ScriptedProvider

pytestmark = pytest.mark.anyio
__all__ = ["message"]


def _asyncpg(kind: type[asyncpg.PostgresError]) -> asyncpg.PostgresError:
    return kind("server message")


@pytest.mark.parametrize(
    "error",
    [
        _asyncpg(asyncpg.CannotConnectNowError),  # 57P03: every restart, failover, recovery
        _asyncpg(asyncpg.CrashShutdownError),  # 57P02
        _asyncpg(asyncpg.AdminShutdownError),  # 57P01
        _asyncpg(asyncpg.TooManyConnectionsError),  # 53300
        _asyncpg(asyncpg.QueryCanceledError),  # 57014: statement_timeout
        _asyncpg(asyncpg.LockNotAvailableError),  # 55P03: lock_timeout
        _asyncpg(asyncpg.ConnectionFailureError),  # class 08
        ConnectionRefusedError(111, "refused"),
        asyncpg.InterfaceError("connection is closed"),
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("unable to open database file"),
        OperationalError("SELECT 1", {}, _asyncpg(asyncpg.CannotConnectNowError)),
        OperationalError("SELECT 1", {}, sqlite3.OperationalError("database is locked")),
    ],
    ids=repr,
)
def test_database_not_answering_now_is_unavailable_on_both_drivers(error):
    """Each of these says "retry later", by SQLSTATE class or SQLite code, wrapped or not."""
    assert is_unavailable(error)


@pytest.mark.parametrize(
    "error",
    [
        _asyncpg(asyncpg.UniqueViolationError),
        _asyncpg(asyncpg.UndefinedTableError),
        sqlite3.IntegrityError("UNIQUE constraint failed"),
        sqlite3.OperationalError("no such table: send_records"),
        IntegrityError("INSERT", {}, _asyncpg(asyncpg.UniqueViolationError)),
        ValueError("a bug"),
    ],
    ids=repr,
)
def test_a_refused_statement_is_not_unavailable(error):
    """A statement the database refused would be refused again: not retried."""
    assert not is_unavailable(error)


@pytest.fixture
def unreachable_url(db_backend, tmp_path) -> str:
    """A database URL of the test's backend that nothing answers."""
    if db_backend == "postgresql":
        return f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere"
    return f"sqlite+aiosqlite:///{tmp_path}/missing-dir/reminders.db"


async def test_push_answers_503_with_retry_after_while_the_database_is_unreachable(
    unreachable_url, tmp_path, clock
):
    """Before: the claim's connection error reached the route and it answered 500 (the
    queue's retries burned, the load balancer saw errors)."""
    settings = make_settings(unreachable_url, tmp_path)
    container = build_container(settings, clock=clock)
    app = create_app(container=container)
    app.state.container = container
    payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await push(client, {"message_id": "m1", "payload": payload})
    finally:
        await container.aclose()
        await asyncio.sleep(0.2)  # aiosqlite's thread of the failed connect ends first
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    assert response.json()["detail"] == "database_unavailable"


async def test_a_callers_timeout_does_not_cut_the_send_and_finalize_short(
    container, provider: ScriptedProvider, message
):
    """The in-process dispatcher waits at most its push timeout. Before: its cancellation
    reached the send (or the finalize after it), the row stayed ``sending`` with the
    provider's answer lost, and the redelivery after the lease sent again."""
    provider.gate = asyncio.Event()
    delivery = Delivery(queue=message.queue, message_id=message.message_id, payload=message.payload)
    caller = asyncio.create_task(receive_delivery(container.receiver, delivery))
    await provider.entered.wait()  # the request has left for the provider
    caller.cancel()  # what the dispatcher's asyncio.timeout does at its push timeout
    with pytest.raises(asyncio.CancelledError):
        await caller
    provider.gate.set()  # the provider accepts after the caller gave up
    await container.receiver.drain()
    row = await the_row(container)
    assert (row["state"], row["attempt_count"], len(provider.calls)) == ("sent", 1, 1)


async def test_the_finalize_is_retried_for_as_long_as_the_lease_lasts(container, clock):
    """The finalize's budget is what remains of the lease it holds, not a constant."""
    retry = container.receiver.finalize_retry(clock.now + timedelta(seconds=45))
    assert retry.budget_seconds == 45
