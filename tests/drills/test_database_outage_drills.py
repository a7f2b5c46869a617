"""Drills of issue 19, point 4, counted at the providers: a real SMTP server (aiosmtpd)
counts every DATA by Message-ID, a loopback webhook endpoint every POST by webhook-id.

2,000 reminders x (email, webhook) go out through the receiver in process (16 at a time,
as the embedded dispatcher delivers them in ``reminders serve``) on a PostgreSQL cluster of
the test's own, while that cluster is restarted (``pg_ctl restart -m fast``) or stopped for
12 s and started again. Each drill: 0 lost (every send recorded ``sent`` and received), 0
sent twice, and no delivery raised (over HTTP, a 500). Default timing settings.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from pydantic import SecretStr
from sqlalchemy import func, select

from app.container import Container, build_container
from app.db.migrations import upgrade_to_head
from app.db.tables import send_records
from tests.conftest import REAL_MAIL, make_settings
from tests.support.channel_servers import WebhookSink, serve, smtp_server
from tests.support.ledger_states import seed_enqueued
from tests.support.own_postgres import OwnPostgres, own_postgres
from tests.support.redelivery import deliver_until_acknowledged

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(900)]

COUNT = 2000
CHANNELS = ("email", "webhook")
WORKERS = 16


@pytest.fixture
def cluster(db_backend) -> AsyncIterator[OwnPostgres]:
    """A cluster of this test's own, migrated."""
    if db_backend != "postgresql":
        pytest.skip("the drills restart a PostgreSQL cluster")
    with own_postgres() as pg:
        upgrade_to_head(pg.url)
        yield pg


async def run_drill(
    cluster: OwnPostgres, tmp_path: Path, event: Callable[[], Awaitable[None]]
) -> dict[str, float]:
    """Deliver everything while ``event`` happens a quarter of the way in; the figures."""
    sink = WebhookSink()
    with smtp_server() as smtp:
        async with serve(sink.app()) as base_url:
            settings = make_settings(
                cluster.url, tmp_path, **REAL_MAIL, email_provider="smtp", smtp_host=smtp.host,
                smtp_port=smtp.port, smtp_security="none", webhook_provider="webhook",
                webhook_signing_secret=SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
                webhook_allowed_targets=["127.0.0.0/8"], usefulness_grace_seconds=10**9,
                lease_seconds=60, provider_timeout_seconds=20,
                unsubscribe_secret=SecretStr("drill-unsubscribe-secret-0123456789abcdef"),
            )  # fmt: skip
            container = build_container(settings)
            try:
                ids = await seed_enqueued(
                    container.engine, COUNT, channels=CHANNELS, email="ada@example.com",
                    webhook_url=f"{base_url}/hook",
                )  # fmt: skip
                figures = await _deliver(container, ids, smtp, sink, event)
                figures["recorded_sent"] = await _sent_rows(container)
            finally:
                await container.aclose()
        emails = collections.Counter(m["Message-ID"] for m in smtp.handler.messages)
    hooks = collections.Counter(r["headers"]["webhook-id"] for r in sink.received)
    figures.update(
        emails=len(emails), webhooks=len(hooks),
        emails_twice=sum(1 for n in emails.values() if n > 1),
        webhooks_twice=sum(1 for n in hooks.values() if n > 1),
    )  # fmt: skip
    return figures


async def _deliver(container: Container, ids, smtp, sink, event) -> dict[str, float]:
    waiting = collections.deque((rid, channel) for rid in ids for channel in CHANNELS)
    failures: list[BaseException] = []
    answers: collections.Counter[str] = collections.Counter()
    started = time.monotonic()

    async def trigger() -> dict[str, float]:
        while len(smtp.handler.messages) + len(sink.received) < COUNT // 2:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        at = time.monotonic()
        await event()
        return {"event_at_s": at - started, "event_s": time.monotonic() - at}

    consumers = (
        deliver_until_acknowledged(container.receiver, waiting, answers, failures)
        for _ in range(WORKERS)
    )
    timing, *_ = await asyncio.gather(trigger(), *consumers)
    await container.receiver.drain()
    assert failures == [], failures[:3]
    return {**timing, "total_s": time.monotonic() - started, **answers}


async def _sent_rows(container: Container) -> int:
    async with container.engine.connect() as conn:
        statement = select(func.count()).where(send_records.c.state == "sent")
        return int((await conn.execute(statement)).scalar_one())


def assert_exactly_once(figures: dict[str, float]) -> None:
    """Every send received once and recorded sent."""
    print("drill figures:", figures)  # the closing note quotes them
    assert (figures["emails"], figures["webhooks"]) == (COUNT, COUNT)
    assert (figures["emails_twice"], figures["webhooks_twice"]) == (0, 0)
    assert figures["recorded_sent"] == COUNT * len(CHANNELS)


async def test_a_fast_restart_in_the_middle_sends_each_once(cluster, tmp_path):
    """``pg_ctl restart -m fast`` mid-run. Before: 16 webhooks twice (57P03 not recognised,
    the finalize after an accepted send dropped, the row reclaimed after the lease)."""
    figures = await run_drill(cluster, tmp_path, lambda: cluster.apg_ctl("restart", "-m", "fast"))
    assert_exactly_once(figures)


async def test_a_12_s_outage_in_the_middle_sends_each_once(cluster, tmp_path):
    """Stopped for 12 s, then started. Before: finalizes given up or cancelled by the
    dispatcher's push timeout, and the messages sent again."""

    async def outage() -> None:
        await cluster.apg_ctl("stop", "-m", "fast")
        await asyncio.sleep(12)
        await cluster.apg_ctl("start")

    assert_exactly_once(await run_drill(cluster, tmp_path, outage))


__all__ = ["asyncpg"]
