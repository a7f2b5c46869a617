"""Races with separate database connections: receivers on one key, concurrent sweeps, creates.

Each "replica" is a second container built from the same settings, so it has its own engine
and its own connections to the same database (PostgreSQL: separate sessions; SQLite: a
second connection to the same file).
"""

import asyncio
import dataclasses
from collections import Counter
from datetime import timedelta

import httpx
import pytest

from app.container import build_container
from app.db.engine import create_engine
from app.main import create_app
from app.services import customers
from app.services import reminders as service
from app.services.customers import CustomerChange
from app.services.sweep import SweepLimits, sweep
from tests.support.flow import API, CRON, get_reminder, push_message, put_customer, put_reminder
from tests.support.recording import RecordingPublisher

pytestmark = pytest.mark.anyio


@pytest.fixture
async def replica(settings, clock, rand, provider, publisher):
    """A second service instance on the same database, sharing the provider and the queue."""
    built = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    built.receiver = dataclasses.replace(
        built.receiver, providers={"email": provider, "webhook": provider}
    )
    app = create_app(container=built)
    app.state.container = built
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://replica") as http:
        yield http
    await built.engine.dispose()


async def queued_messages(client, clock, publisher, count):
    """``count`` reminders due now, swept; their messages by reminder id."""
    await put_customer(client, "c1")
    for n in range(count):
        await put_reminder(client, f"r{n:02}", customer_id="c1", due_at=clock.now)
    response = await client.post("/cron/sweep", headers=CRON)
    assert response.json()["enqueued"] == count
    return {m.payload["reminder_id"]: m for m in publisher.drain()}


async def test_second_receiver_is_busy_while_the_first_sends(
    client, replica, clock, publisher, provider
):
    """Replica B gets busy for the key replica A is sending; exactly one provider call."""
    [message] = (await queued_messages(client, clock, publisher, 1)).values()
    provider.gate = asyncio.Event()
    first = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    second = await push_message(replica, message)
    assert second.status_code == 503
    assert second.json()["outcome"] == "busy"
    assert second.headers["Retry-After"] == "60"
    provider.gate.set()
    assert (await first).json()["outcome"] == "sent"
    assert (await push_message(replica, message)).json()["outcome"] == "duplicate"
    assert len(provider.calls) == 1


async def test_simultaneous_redeliveries_make_one_provider_call_per_key(
    client, replica, clock, publisher, provider
):
    """Racing pushes of the same message on two replicas: one send per key, never two."""
    messages = await queued_messages(client, clock, publisher, 12)
    answers = await asyncio.gather(
        *(
            push_message(http, message)
            for message in messages.values()
            for http in (client, replica, client, replica)
        )
    )
    calls = Counter(call.idempotency_key for call in provider.calls)
    assert calls == {f"{rid}:email:scripted": 1 for rid in messages}
    by_reminder: dict[str, list[str]] = {}
    for answer in answers:
        by_reminder.setdefault(answer.json()["reminder_id"], []).append(answer.json()["outcome"])
    for outcomes in by_reminder.values():
        assert outcomes.count("sent") == 1
        assert set(outcomes) - {"sent"} <= {"busy", "duplicate"}
    for rid in messages:
        reminder = await get_reminder(client, rid)
        assert reminder["state"] == "done"
        assert [r["attempt_count"] for r in reminder["send_records"]] == [1]


async def test_concurrent_creates_of_one_id_make_one_reminder(client, replica, clock):
    """Two replicas PUT the same new reminder at once: one 201, one 200, one row, version 1."""
    await put_customer(client, "c1")
    body = {
        "customer_id": "c1",
        "kind": "weekly_digest",
        "due_at": clock.now.isoformat(),
        "channels": ["email"],
    }
    first, second = await asyncio.gather(
        client.put("/v1/reminders/r1", json=body, headers=API),
        replica.put("/v1/reminders/r1", json=body, headers=API),
    )
    assert sorted([first.status_code, second.status_code]) == [200, 201]
    assert first.json() == second.json()
    assert first.json()["schedule_version"] == 1


async def seed_reminders(database_url, clock, count):
    """``count`` reminders due over the next day, every third one on two channels."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await customers.put_customer(
                conn,
                "c1",
                CustomerChange(email="c1@example.com", webhook_url="https://hooks.example.com/c1"),
                now=clock.now,
            )
            for n in range(count):
                channels = ["email", "webhook"] if n % 3 == 0 else ["email"]
                values = {
                    "customer_id": "c1",
                    "kind": "weekly_digest",
                    "due_at": clock.now + timedelta(minutes=5 * (n % 288)),
                    "expires_at": None,
                    "channels": channels,
                    "data": {},
                }
                await service.put_reminder(conn, f"r{n:04}", values, now=clock.now)
    finally:
        await engine.dispose()


async def test_two_concurrent_sweeps_publish_each_reminder_channel_once(clean_database_url, clock):
    """Two sweeps on separate engines, small batches: every (reminder, channel) exactly once."""
    count = 360
    await seed_reminders(clean_database_url, clock, count)
    recorder = RecordingPublisher(clock)
    engines = [create_engine(clean_database_url) for _ in range(2)]
    limits = SweepLimits(batch_size=7, time_budget_seconds=840, claim_seconds=120)
    try:
        reports = await asyncio.gather(
            *(
                sweep(engine, recorder, queue_for=lambda c: "reminders", clock=clock, limits=limits)
                for engine in engines
            )
        )
        expected = {(f"r{n:04}", "email") for n in range(count)} | {
            (f"r{n:04}", "webhook") for n in range(0, count, 3)
        }
        assert recorder.publish_counts() == {key: 1 for key in expected}
        assert sum(report.enqueued for report in reports) == count
        assert all(report.enqueued > 0 for report in reports)  # the two really interleaved
        assert all(size <= 7 * 2 for size in recorder.batches)
        assert all(report.error is None for report in reports)
        follow_up = await sweep(
            engines[0], recorder, queue_for=lambda c: "reminders", clock=clock, limits=limits
        )
        assert (follow_up.enqueued, follow_up.remaining) == (0, 0)
    finally:
        for engine in engines:
            await engine.dispose()
