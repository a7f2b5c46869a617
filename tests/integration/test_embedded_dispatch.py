"""The embedded queue's dispatcher against a real database and a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.queues.embedded.dispatcher import Dispatcher, DispatchLimits
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import AiohttpPusher, PushTarget
from app.db import queue_repo
from app.db.ledger import PgLedger, ledger_for
from app.db.queue_pg import PgQueueStatements, queue_statements_for
from app.db.queue_tables import queue_messages
from app.domain.clock import utc_now
from app.domain.messages import OutgoingMessage
from app.domain.retry import BackoffPolicy
from tests.support.clock import FakeClock
from tests.support.push import PUSH_SECRET
from tests.support.push_server import Answer, PushServer

BACKOFF = BackoffPolicy(base_seconds=2.0, cap_seconds=60.0)


@pytest.fixture
async def server() -> AsyncIterator[PushServer]:
    running = PushServer()
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
def publisher(engine: AsyncEngine, clock: FakeClock) -> EmbeddedQueuePublisher:
    return EmbeddedQueuePublisher(engine, max_retries=2, clock=clock)


@pytest.fixture
async def statements(engine: AsyncEngine) -> AsyncIterator[PgQueueStatements | None]:
    """What ``reminders serve`` gives its dispatcher: on PostgreSQL, the claim and the
    acknowledgement as statements on the ledger's raw pool; elsewhere none (the engine)."""
    ledger = ledger_for(engine, raw_connections=4)
    yield queue_statements_for(ledger)
    if isinstance(ledger, PgLedger):
        await ledger.close()


def make_dispatcher(
    engine: AsyncEngine,
    clock: FakeClock,
    base_url: str,
    pusher: AiohttpPusher,
    statements: PgQueueStatements | None,
    seed: int = 7,
) -> Dispatcher:
    return Dispatcher(
        engine,
        pusher,
        PushTarget(base_url=base_url, secret=PUSH_SECRET.encode()),
        limits=DispatchLimits(
            concurrency=4, batch_size=10, visibility_timeout_seconds=60, push_timeout_seconds=5,
            backoff=BACKOFF,
        ),
        clock=clock,
        rand=random.Random(seed),
        statements=statements,
    )  # fmt: skip


@pytest.fixture
async def pusher() -> AsyncIterator[AiohttpPusher]:
    owned = AiohttpPusher(max_connections=4)
    yield owned
    await owned.close()


@pytest.fixture
def dispatcher(engine, clock, server, pusher, statements) -> Dispatcher:
    return make_dispatcher(engine, clock, server.base_url, pusher, statements)


def message(key: str = "r1:email:v1", delay: float = 0.0, queue: str = "reminders"):
    payload = {"v": 1, "reminder_id": key.split(":")[0], "channel": "email", "schedule_version": 1}
    return OutgoingMessage(queue=queue, payload=payload, delay_seconds=delay, idempotency_key=key)


async def rows(engine: AsyncEngine) -> list[dict]:
    async with engine.connect() as conn:
        return await queue_repo.list_messages(conn)


async def test_acknowledged_push_deletes_the_message_and_is_signed_as_the_receiver_checks(
    publisher, dispatcher, server, engine
):
    """A 2xx answer deletes the message; the push carries the Infrai envelope, signed."""
    message_id = await publisher.publish(message())
    report = await dispatcher.run_once()
    assert (report.claimed, report.acknowledged) == (1, 1)
    [push] = server.received
    assert push.authentic
    assert push.queue == "reminders"
    assert push.envelope == {
        "message_id": message_id,
        "payload": {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1},
        "attempt": 1,
    }
    assert await rows(engine) == []
    assert (await dispatcher.run_once()).claimed == 0


async def test_a_delayed_message_is_not_pushed_before_its_delay(
    publisher, dispatcher, server, clock
):
    """A message published with a delay stays invisible until the delay has passed."""
    await publisher.publish(message(delay=3600))
    clock.advance(seconds=3599)
    assert (await dispatcher.run_once()).claimed == 0
    clock.advance(seconds=1)
    assert (await dispatcher.run_once()).acknowledged == 1
    assert len(server.received) == 1


async def test_a_nack_with_retry_after_is_redelivered_no_sooner(
    publisher, dispatcher, server, clock, engine
):
    """503 + Retry-After: the message comes back after exactly that delay, attempt 2."""
    server.script = [Answer(503, "30", "retry")]
    await publisher.publish(message())
    report = await dispatcher.run_once()
    assert (report.redelivering, report.outcomes["retry"]) == (1, 1)
    [row] = await rows(engine)
    assert (row["attempts"], row["last_status"]) == (1, 503)
    assert row["visible_at"] == clock.now + timedelta(seconds=30)
    clock.advance(seconds=29)
    assert (await dispatcher.run_once()).claimed == 0
    clock.advance(seconds=1)
    assert (await dispatcher.run_once()).acknowledged == 1
    assert [p.envelope["attempt"] for p in server.received] == [1, 2]


async def test_retry_after_as_an_http_date_is_honoured(
    publisher, dispatcher, server, clock, engine
):
    """A Retry-After given as an HTTP date is turned into the delay until that instant."""
    at = clock.now + timedelta(minutes=10)
    server.script = [Answer(429, at.strftime("%a, %d %b %Y %H:%M:%S GMT"), "retry")]
    await publisher.publish(message())
    await dispatcher.run_once()
    [row] = await rows(engine)
    assert row["visible_at"] == at


async def test_a_failure_without_retry_after_backs_off_exponentially_with_jitter(
    publisher, dispatcher, server, clock, engine
):
    """500 without Retry-After: full-jitter backoff drawn from the injected random source."""
    server.script = [Answer(500, None, "error"), Answer(500, None, "error")]
    await publisher.publish(message())
    expected = random.Random(7)
    delays = []
    for attempt in (1, 2):
        await dispatcher.run_once()
        [row] = await rows(engine)
        delays.append((row["visible_at"] - clock.now).total_seconds())
        assert delays[-1] == pytest.approx(BACKOFF.delay(attempt, expected))
        clock.set(row["visible_at"])
    assert delays[0] <= 2.0 and delays[1] <= 4.0


async def test_no_answer_counts_as_a_failed_delivery(publisher, engine, clock, pusher, statements):
    """Connection refused (receiver down) is a failed delivery, redelivered with backoff."""
    down = make_dispatcher(engine, clock, "http://127.0.0.1:9", pusher, statements)
    await publisher.publish(message())
    report = await down.run_once()
    assert report.outcomes["no_answer"] == 1
    [row] = await rows(engine)
    assert row["attempts"] == 1
    assert row["last_status"] is None
    assert "Connect" in row["last_error"]
    assert row["visible_at"] > clock.now


def dead_letter_lines(log_lines) -> list[dict]:
    return [line for line in log_lines() if line.get("event") == "queue_dead_letter"]


async def test_past_max_retries_the_message_moves_to_the_dead_letter_list(
    publisher, dispatcher, server, clock, engine, log_lines
):
    """max_retries=2: the third failed delivery dead-letters the message; it is not pushed
    again. The dead letter is an error line (log-level alerting) with the last answer's class."""
    server.script = [Answer(503, "1", "retry")] * 3
    await publisher.publish(message())
    for _ in range(3):
        await dispatcher.run_once()
        clock.advance(seconds=1)
    [row] = await rows(engine)
    assert row["state"] == "dead"
    assert row["attempts"] == 3
    assert row["dead_at"] is not None
    [line] = dead_letter_lines(log_lines)
    assert line == {
        **line,
        "level": "error",
        "logger": "reminders.embedded_queue",
        "queue": "reminders",
        "message_id": row["message_id"],
        "deliveries": 3,
        "error_class": "retry",
    }
    clock.advance(days=1)
    assert (await dispatcher.run_once()).claimed == 0
    assert len(server.received) == 3


async def test_a_dispatcher_that_dies_after_pushing_leaves_the_message_to_redeliver(
    publisher, dispatcher, server, clock, engine
):
    """Pushed but never acknowledged: hidden for the visibility timeout, then delivered again."""
    await publisher.publish(message())
    claimed = await dispatcher.claim(clock.now)
    await dispatcher.push_all(claimed)  # ... and the process dies before apply()
    assert (await dispatcher.run_once()).claimed == 0
    clock.advance(seconds=60)
    report = await dispatcher.run_once()
    assert report.acknowledged == 1
    assert [p.envelope["attempt"] for p in server.received] == [1, 2]
    assert await rows(engine) == []


async def test_concurrent_dispatchers_never_claim_the_same_message(
    publisher, engine, clock, server, pusher, statements
):
    """Two dispatchers claiming at the same instant split the due messages between them
    (on PostgreSQL one claims on the raw pool, the other through the engine)."""
    await publisher.publish_batch([message(f"r{i}:email:v1") for i in range(30)])
    first = make_dispatcher(engine, clock, server.base_url, pusher, statements)
    second = make_dispatcher(engine, clock, server.base_url, pusher, None)
    a, b = await asyncio.gather(first.claim(clock.now), second.claim(clock.now))
    ids_a, ids_b = {m.id for m in a}, {m.id for m in b}
    assert not ids_a & ids_b
    assert len(ids_a) + len(ids_b) == 20  # two batches of 10


async def test_a_late_failure_from_an_expired_claim_does_not_touch_the_new_claim(
    publisher, dispatcher, server, clock, engine
):
    """Results are fenced by the delivery count: a stale claim's nack changes nothing."""
    await publisher.publish(message())
    [old] = await dispatcher.claim(clock.now)
    clock.advance(seconds=60)
    [new] = await dispatcher.claim(clock.now)
    assert new.attempts == 2
    server.script = [Answer(503, "600", "retry")]
    await dispatcher.apply(await dispatcher.push_all([old]), now=clock.now)
    [row] = await rows(engine)
    assert row["visible_at"] == clock.now + timedelta(seconds=60)  # still the new claim's
    assert row["last_status"] is None


async def test_a_last_delivery_without_answer_is_dead_lettered_by_housekeeping(
    publisher, dispatcher, clock, engine, log_lines
):
    """A message claimed max_retries+1 times whose last dispatcher died ends in the dead list,
    logged at error with the error class no_answer."""
    await publisher.publish(message())
    for _ in range(3):
        assert len(await dispatcher.claim(clock.now)) == 1
        clock.advance(seconds=60)
    await dispatcher.housekeep(clock.now)
    [row] = await rows(engine)
    assert row["state"] == "dead"
    assert "no answer" in row["last_error"]
    [line] = dead_letter_lines(log_lines)
    assert (line["level"], line["error_class"]) == ("error", "no_answer")
    assert (line["queue"], line["message_id"]) == ("reminders", row["message_id"])


async def test_messages_past_retention_are_dropped_with_a_log_line(
    publisher, dispatcher, clock, engine, caplog
):
    """After 30 days a message still in the queue (ready or dead) is dropped and logged."""
    await publisher.publish(message(delay=0))
    async with engine.begin() as conn:  # a message that has waited for a month
        await conn.execute(update(queue_messages).values(visible_at=clock.now + timedelta(days=40)))
    clock.advance(days=30)
    with caplog.at_level(logging.WARNING, "reminders.embedded_queue"):
        report = await dispatcher.run_once()
    assert report.expired == 1
    assert await rows(engine) == []
    assert "past its 30-day retention" in caplog.text


async def test_run_loop_delivers_and_stops_gracefully(engine, server, pusher, statements):
    """The polling loop delivers what is published (woken at once) and returns when stopped."""
    live = make_dispatcher(engine, utc_now, server.base_url, pusher, statements)
    publisher = EmbeddedQueuePublisher(engine)
    publisher.on_publish(live.wake)
    stop = asyncio.Event()
    loop = asyncio.create_task(live.run(stop, poll_interval=30))
    await asyncio.sleep(0)
    await publisher.publish(message())
    for _ in range(200):
        if server.received:
            break
        await asyncio.sleep(0.01)
    stop.set()
    total = await asyncio.wait_for(loop, 5)
    assert (total.acknowledged, total.outcomes["sent"]) == (1, 1)
    assert len(server.received) == 1
    async with engine.connect() as conn:
        assert (await conn.execute(select(queue_messages.c.id))).all() == []


async def test_a_claim_and_its_delete_outlive_connections_the_server_ended(
    publisher, dispatcher, server, clock, engine, statements
):
    """PostgreSQL: the raw pool's sessions are ended behind its back (a restart, a
    failover). The next round's claim and delete run again on fresh connections."""
    if statements is None:
        pytest.skip("the raw statements are PostgreSQL's")
    await statements.claim(
        now=clock.now, visible_until=clock.now, limit=1, after=None
    )  # opens the pool
    await publisher.publish_batch([message(f"r{i}:email:v1") for i in range(3)])
    async with engine.connect() as conn:
        ended = await conn.scalar(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
    assert ended >= 1

    report = await dispatcher.run_once()

    assert (report.claimed, report.acknowledged) == (3, 3)
    assert await rows(engine) == []
