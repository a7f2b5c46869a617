"""Drill of issue 19, point 4: a row lock held past the lease while redeliveries wait,
counted at the providers (aiosmtpd's DATA by Message-ID, the webhook endpoint's POSTs by
webhook-id).

500 reminders x (email, webhook) on PostgreSQL, every message delivered twice at once, as an
at-least-once queue may: once through each of two receivers ("replicas": containers of
their own, 8 deliveries at a time each), real clocks, a 6 s lease. A quarter of the way in,
another session locks 200 unsent ledger rows (``FOR UPDATE``: rows claimed and in flight,
whose finalizes then wait, and rows not claimed yet, whose claims wait) and holds them for
12 s, twice the lease, while both replicas' claims and redeliveries queue behind it. Then:
0 lost, 0 sent twice, no delivery raised (over HTTP, a 500).

Finding 3 of the issue: a claim that waited committed a lease already over, the redelivery
queued behind it reclaimed the row at once, and both called the provider.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from sqlalchemy import func, insert, select, text

from app.container import Container, build_container
from app.db.tables import send_records
from tests.conftest import REAL_MAIL, make_settings
from tests.support.channel_servers import WebhookSink, serve, smtp_server
from tests.support.ledger_states import NOW, seed_enqueued
from tests.support.redelivery import deliver_until_acknowledged

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

COUNT = 500
CHANNELS = {"email": "smtp", "webhook": "webhook"}  # channel: its provider's name
WORKERS = 8  # per replica
LEASE_SECONDS = 6
HELD_SECONDS = 2 * LEASE_SECONDS
LOCKED_ROWS = 200


@pytest.fixture
async def replicas(db_backend, clean_database_url, tmp_path) -> AsyncIterator[dict]:
    """Two receivers on the run's database, the SMTP server and the webhook endpoint."""
    if db_backend != "postgresql":
        pytest.skip("row locks held by another session: PostgreSQL")
    sink = WebhookSink()
    with smtp_server() as smtp:
        async with serve(sink.app()) as base_url:
            settings = make_settings(
                clean_database_url, tmp_path, **REAL_MAIL, email_provider="smtp",
                smtp_host=smtp.host,
                smtp_port=smtp.port, smtp_security="none", webhook_provider="webhook",
                webhook_signing_secret=SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
                webhook_allowed_targets=["127.0.0.0/8"], usefulness_grace_seconds=10**9,
                lease_seconds=LEASE_SECONDS, provider_timeout_seconds=3,
                unsubscribe_secret=SecretStr("drill-unsubscribe-secret-0123456789abcdef"),
            )  # fmt: skip
            containers = [build_container(settings), build_container(settings)]
            try:
                yield {"containers": containers, "smtp": smtp, "sink": sink, "url": base_url}
            finally:
                for container in containers:
                    await container.aclose()


async def test_a_row_lock_held_past_the_lease_sends_each_once(replicas):
    """Every send once at the providers, recorded sent; no delivery raised."""
    containers: list[Container] = replicas["containers"]
    smtp, sink = replicas["smtp"], replicas["sink"]
    engine = containers[0].engine
    ids = await seed_enqueued(
        engine, COUNT, channels=tuple(CHANNELS), email="ada@example.com",
        webhook_url=f"{replicas['url']}/hook",
    )  # fmt: skip
    await _pending_rows(engine, ids)
    messages = [(rid, channel) for rid in ids for channel in CHANNELS]
    failures: list[BaseException] = []
    answers: collections.Counter[str] = collections.Counter()
    started = time.monotonic()

    async def replica(container: Container) -> None:
        waiting = collections.deque(messages)

        await asyncio.gather(
            *(
                deliver_until_acknowledged(container.receiver, waiting, answers, failures)
                for _ in range(WORKERS)
            )
        )

    async def lock_rows() -> dict[str, float]:
        while len(smtp.handler.messages) + len(sink.received) < COUNT // 2:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        at = time.monotonic()
        async with engine.connect() as locker:
            locked = await locker.execute(
                select(send_records.c.id)
                .where(send_records.c.state != "sent")
                .order_by(send_records.c.id)
                .limit(LOCKED_ROWS)
                .with_for_update()
            )
            count = len(locked.all())
            await asyncio.sleep(HELD_SECONDS)
            waiters = await _lock_waiters(locker)
            await locker.commit()
        return {"lock_at_s": at - started, "locked_rows": count, "waiting_at_release": waiters}

    timing, *_ = await asyncio.gather(lock_rows(), *(replica(c) for c in containers))
    for container in containers:
        await container.receiver.drain()
    emails = collections.Counter(m["Message-ID"] for m in smtp.handler.messages)
    hooks = collections.Counter(r["headers"]["webhook-id"] for r in sink.received)
    figures = {
        **timing, "total_s": time.monotonic() - started, **answers,
        "emails": len(emails), "webhooks": len(hooks),
        "emails_twice": sum(1 for n in emails.values() if n > 1),
        "webhooks_twice": sum(1 for n in hooks.values() if n > 1),
        "recorded_sent": await _sent_rows(engine), "raised": len(failures),
    }  # fmt: skip
    print("drill figures:", figures)
    assert failures == [], failures[:3]
    assert timing["locked_rows"] == LOCKED_ROWS
    assert timing["waiting_at_release"] > 0, "nothing waited for the locked rows"
    assert (figures["emails"], figures["webhooks"]) == (COUNT, COUNT)
    assert (figures["emails_twice"], figures["webhooks_twice"]) == (0, 0)
    assert figures["recorded_sent"] == COUNT * len(CHANNELS)


async def _pending_rows(engine, ids: list[str]) -> None:
    """Every send's ledger row, pending: the rows the lock takes include sends nobody
    claimed yet (as after a released claim or a retry)."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(send_records),
            [
                dict(
                    reminder_id=rid, channel=channel, provider=provider, state="pending",
                    attempt_count=0, attempt_budget_start=0, redrive_count=0,
                    idempotency_key=f"{rid}:{channel}:{provider}", created_at=NOW,
                    updated_at=NOW,
                )
                for rid in ids
                for channel, provider in CHANNELS.items()
            ],
        )  # fmt: skip


async def _lock_waiters(conn) -> int:
    result = await conn.execute(
        text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
    )
    return int(result.scalar_one())


async def _sent_rows(engine) -> int:
    async with engine.connect() as conn:
        statement = select(func.count()).where(send_records.c.state == "sent")
        return int((await conn.execute(statement)).scalar_one())
