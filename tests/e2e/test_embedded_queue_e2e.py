"""End to end with real processes: ``reminders serve`` (uvicorn on loopback), the embedded
queue's dispatcher (in-process or ``reminders dispatch``), the test database, and a
customer webhook endpoint. Waiting is polling with a deadline."""

from __future__ import annotations

import asyncio
import re
import signal
from datetime import UTC, datetime

import httpx
import pytest

from tests.e2e.processes import (
    API,
    CRON,
    REMINDERS,
    Process,
    dispatch,
    free_port,
    serve,
    service_env,
    wait_healthy,
    wait_until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def register(base_url: str, count: int, *, webhook_url: str, prefix: str = "r") -> None:
    """``count`` customers with a webhook each, a reminder due now each, then one sweep."""
    due = datetime.now(UTC).isoformat()
    async with httpx.AsyncClient(base_url=base_url, headers=API, timeout=30) as client:
        for n in range(count):
            customer = f"{prefix}-cust-{n}"
            answer = await client.put(
                f"/v1/customers/{customer}",
                json={"email": f"{customer}@example.com", "webhook_url": webhook_url},
            )
            assert answer.status_code == 200, answer.text
            answer = await client.put(
                f"/v1/reminders/{prefix}-{n}",
                json={"customer_id": customer, "kind": "renewal", "due_at": due,
                      "channels": ["webhook"]},
            )  # fmt: skip
            assert answer.status_code == 201, answer.text
        swept = await client.post("/cron/sweep", headers=CRON)
        assert swept.json()["enqueued"] == count, swept.text


async def stop_gracefully(process: Process) -> None:
    """SIGTERM, then the exit (uvicorn re-raises the signal once it has shut down cleanly)."""
    process.signal(signal.SIGTERM)
    assert await process.wait_exit(timeout=30) in (0, -signal.SIGTERM)
    assert "Traceback" not in process.output(), process.output()


def one_send_each(rows: list[dict], count: int) -> None:
    """The ledger holds exactly one sent row per (reminder, channel), each claimed once."""
    assert len(rows) == count
    assert {(row["reminder_id"], row["channel"]) for row in rows}.__len__() == count
    assert all(row["state"] == "sent" for row in rows), rows
    assert all(row["attempt_count"] == 1 for row in rows), rows


async def test_the_demo_ends_every_path_as_designed_in_the_ledger(clean_database_url, tmp_path):
    """`reminders demo` (its own server, dispatcher and webhook endpoint) leaves each outcome;
    the REMINDERS_* of the environment (other tokens here) do not disturb it. At 80 columns
    its table fits, and it ends by explaining the final states and what to try next."""
    env = service_env(clean_database_url, tmp_path / "unused")
    demo = await asyncio.create_subprocess_exec(
        *[REMINDERS, "demo", "--dir", str(tmp_path), "--database-url", clean_database_url],
        env={**env, "COLUMNS": "80"},
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output = (await asyncio.wait_for(demo.communicate(), timeout=90))[0].decode()
    assert demo.returncode == 0, output
    from app.db import queue_repo, summary_repo
    from app.db.engine import create_engine

    engine = create_engine(clean_database_url)
    try:
        async with engine.connect() as conn:
            rows = await summary_repo.ledger_rows(conn)
            dead_letters = await summary_repo.dead_letter_count(conn)
            queue = await queue_repo.count_by_state(conn)
    finally:
        await engine.dispose()
    ledger = {(r["reminder_id"], r["channel"]): (r["state"], r["outcome"], r["attempt_count"])
              for r in rows}  # fmt: skip
    assert ledger == {
        ("demo:due-now", "email"): ("sent", "sent", 1),
        ("demo:due-now", "webhook"): ("sent", "sent", 1),
        ("demo:in-6-days", "email"): ("sent", "sent", 1),
        ("demo:in-8-days", "email"): ("sent", "sent", 1),
        ("demo:cancelled", "email"): ("terminal_failure", "cancelled", 1),
        # the stale v1 delivery gave its claim back; v2 was sent on the second claim
        ("demo:rescheduled", "email"): ("sent", "sent", 2),
        ("demo:unsubscribed", "email"): ("terminal_failure", "suppressed", 1),
        ("demo:permanent", "webhook"): ("terminal_failure", "terminal", 1),
        ("demo:transient", "webhook"): ("sent", "sent", 2),
        ("demo:down", "webhook"): ("dead", "dead_lettered", 3),
        ("demo:pushed-twice", "email"): ("sent", "sent", 1),
    }
    assert {r["reminder_id"]: r["schedule_version"] for r in rows}["demo:rescheduled"] == 2
    assert dead_letters == 1
    assert queue == {"ready": 0, "dead": 0}
    assert len(list((tmp_path / "outbox" / "email").glob("*.eml"))) == 5
    assert "sent, duplicate" in output  # the pushed-twice row's queue answers
    table = output.split("Outcomes, read back from the send ledger", 1)[1].split("Ledger rows")[0]
    assert max(len(line.rstrip()) for line in table.splitlines()) <= 80, table
    assert re.search(r"^ ?down +webhook +dead_lettered +3 ", table, re.MULTILINE), table
    ending = output.split("every path ended as designed", 1)[1]
    assert "Why 'cancelled' and 'suppressed' are final without a send" in ending
    assert "Try next:" in ending and "reminders dead-letters list" in ending


async def test_a_receiver_answering_503_then_200_sends_exactly_once(
    clean_database_url, tmp_path, endpoint, ledger, processes
):
    """The webhook fails once (503 → receiver nacks 503); the redelivery sends; one send."""
    endpoint.script = [503]
    port = free_port()
    env = service_env(clean_database_url, tmp_path / "outbox")
    server = serve(env, port, tmp_path / "serve.log").start()
    processes.append(server)
    base_url = f"http://127.0.0.1:{port}"
    await wait_healthy(base_url, server)
    await register(base_url, 1, webhook_url=endpoint.url)

    async def sent() -> bool:
        return await ledger.sent() == 1 and (await ledger.queue())["ready"] == 0

    await wait_until(sent, timeout=30, what="the send", processes=(server,))
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("sent", 2)
    assert len(endpoint.requests) == 2
    assert len(set(endpoint.requests)) == 1  # the same webhook-id both times
    assert list(endpoint.accepted.values()) == [1]


async def test_stopping_the_service_mid_dispatch_and_starting_it_later_loses_nothing(
    clean_database_url, tmp_path, endpoint, ledger, processes
):
    """SIGTERM while pushes are in flight: they finish; after a restart the rest go out once."""
    endpoint.delay = 0.2
    port, count = free_port(), 20
    env = service_env(clean_database_url, tmp_path / "outbox", REMINDERS_EMBEDDED_CONCURRENCY="3")
    server = serve(env, port, tmp_path / "serve.log").start()
    processes.append(server)
    base_url = f"http://127.0.0.1:{port}"
    await wait_healthy(base_url, server)
    await register(base_url, count, webhook_url=endpoint.url)

    async def some_sent() -> bool:
        return await ledger.sent() >= 3

    await wait_until(some_sent, timeout=30, what="the first sends", processes=(server,))
    await stop_gracefully(server)
    rows = await ledger.rows()
    assert not [row for row in rows if row["state"] == "sending"], "a send was cut off"
    assert await ledger.sent() < count, "stopped too late to prove anything"
    server.start()  # "for a while": the time it takes to start again
    await wait_healthy(base_url, server)

    async def all_sent() -> bool:
        return await ledger.sent() == count and (await ledger.queue())["ready"] == 0

    await wait_until(all_sent, timeout=45, what="every send", processes=(server,))
    one_send_each([row for row in await ledger.rows() if row["channel"]], count)
    assert sorted(endpoint.accepted.values()) == [1] * count


async def test_a_receiver_down_for_a_while_loses_nothing(
    clean_database_url, tmp_path, endpoint, ledger, processes
):
    """The dispatcher keeps failing to reach a stopped service, then delivers once it is back."""
    port, count = free_port(), 10
    env = service_env(
        clean_database_url,
        tmp_path / "outbox",
        REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false",
        REMINDERS_EMBEDDED_PUSH_BASE_URL=f"http://127.0.0.1:{port}",
    )
    server = serve(env, port, tmp_path / "serve.log").start()
    processes.append(server)
    base_url = f"http://127.0.0.1:{port}"
    await wait_healthy(base_url, server)
    await register(base_url, count, webhook_url=endpoint.url)
    await stop_gracefully(server)
    dispatcher = dispatch(env, tmp_path / "dispatch.log").start()
    processes.append(dispatcher)

    async def failed_twice() -> bool:
        messages = await ledger.queue_messages()
        return len(messages) == count and all(m["attempts"] >= 2 for m in messages)

    await wait_until(failed_twice, timeout=30, what="failed pushes", processes=(dispatcher,))
    assert all(m["last_status"] is None for m in await ledger.queue_messages())  # no answer
    server.start()
    await wait_healthy(base_url, server)

    async def all_sent() -> bool:
        return await ledger.sent() == count and (await ledger.queue())["ready"] == 0

    await wait_until(all_sent, timeout=30, what="every send", processes=(server, dispatcher))
    one_send_each(await ledger.rows(), count)
    assert (await ledger.queue())["dead"] == 0
    assert sorted(endpoint.accepted.values()) == [1] * count


async def test_a_dispatcher_killed_mid_run_redelivers_and_each_reminder_is_sent_once(
    clean_database_url, tmp_path, endpoint, ledger, processes
):
    """SIGKILL with pushes in flight: their claims expire, a new dispatcher delivers them again,
    and the ledger (and the endpoint) still see one send per (reminder, channel)."""
    endpoint.delay = 0.3
    port, count = free_port(), 24
    env = service_env(
        clean_database_url,
        tmp_path / "outbox",
        REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false",
        REMINDERS_EMBEDDED_PUSH_BASE_URL=f"http://127.0.0.1:{port}",
        REMINDERS_EMBEDDED_CONCURRENCY="4",
        REMINDERS_EMBEDDED_BATCH_SIZE="8",
        REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS="16",
        REMINDERS_EMBEDDED_VISIBILITY_TIMEOUT_SECONDS="17",
    )
    server = serve(env, port, tmp_path / "serve.log").start()
    processes.append(server)
    base_url = f"http://127.0.0.1:{port}"
    await wait_healthy(base_url, server)
    await register(base_url, count, webhook_url=endpoint.url)
    first = dispatch(env, tmp_path / "dispatch-1.log").start()
    processes.append(first)

    async def some_sent() -> bool:
        return await ledger.sent() >= 4

    await wait_until(some_sent, timeout=30, what="the first sends", processes=(first, server))
    first.signal(signal.SIGKILL)
    assert await first.wait_exit(timeout=10) == -signal.SIGKILL
    now = datetime.now(UTC)
    in_flight = [
        m for m in await ledger.queue_messages() if m["attempts"] and m["visible_at"] > now
    ]
    assert in_flight, "killed between rounds: nothing was in flight"
    second = dispatch(env, tmp_path / "dispatch-2.log").start()
    processes.append(second)

    async def all_sent() -> bool:
        return await ledger.sent() == count and (await ledger.queue())["ready"] == 0

    await wait_until(all_sent, timeout=40, what="every send", processes=(second, server))
    one_send_each(await ledger.rows(), count)
    assert sorted(endpoint.accepted.values()) == [1] * count
    assert len(endpoint.requests) == count
