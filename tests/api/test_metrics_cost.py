"""/metrics is cheap and closed: scrapes are served from memory (one background task reads
the ledger), a token is required outside dev mode unless the route is declared public, and
/readyz has a connection nothing else can take."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError
from sqlalchemy import event

from tests.conftest import make_settings
from tests.support.flow import METRICS, scrape

pytestmark = pytest.mark.anyio


def _count_checkouts(engine) -> list[int]:
    taken = [0]

    @event.listens_for(engine.sync_engine, "checkout")
    def _checkout(*_args) -> None:
        taken[0] += 1

    return taken


async def test_a_scrape_never_touches_the_database(client, container):
    """Twenty scrapes, no connection taken: the gauges come from the last snapshot."""
    await container.ledger_metrics.refresh()
    taken = _count_checkouts(container.engine)
    texts = [await scrape(client, refresh=False) for _ in range(20)]
    assert taken == [0]
    assert all("reminders_ledger_up 1.0" in text for text in texts)
    assert all('reminders_audit_violations{invariant="sent_twice"} 0.0' in text for text in texts)
    assert "reminders_ledger_snapshot_age_seconds" in texts[0]


async def test_concurrent_scrapes_on_a_starved_pool_leave_readyz_ready(client, container):
    """Every connection of the shared pool held (as a load spike would) and 40 concurrent
    scrapes: each scrape answers at once, and /readyz, on its own connection, stays 200."""
    await container.ledger_metrics.refresh()
    async with contextlib.AsyncExitStack() as held:
        for _ in range(container.engine.pool.size()):
            await held.enter_async_context(container.engine.connect())
        async with asyncio.timeout(5):
            scrapes = [client.get("/metrics", headers=METRICS) for _ in range(40)]
            *answers, ready = await asyncio.gather(*scrapes, client.get("/readyz"))
    assert [answer.status_code for answer in answers] == [200] * 40
    assert all("reminders_ledger_up 1.0" in answer.text for answer in answers)
    assert ready.status_code == 200, ready.text


async def test_the_background_task_takes_the_snapshot(container):
    """``start`` reads the ledger at once and keeps doing so until stopped."""
    assert container.ledger_metrics.snapshot.taken_at is None
    halt = container.ledger_metrics.start()
    try:
        async with asyncio.timeout(5):
            while container.ledger_metrics.snapshot.taken_at is None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    finally:
        await halt()
    assert container.ledger_metrics.snapshot.figures is not None


async def test_metrics_without_the_token_is_401(client):
    """Closed by default: no bearer token, or a wrong one, is 401."""
    assert (await client.get("/metrics")).status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 40}
    assert (await client.get("/metrics", headers=wrong)).status_code == 401


def test_outside_dev_mode_a_metrics_token_is_required_unless_public(tmp_path: Path):
    """No REMINDERS_METRICS_TOKEN outside dev mode is refused naming it (startup adds how to
    open the route); REMINDERS_METRICS_PUBLIC=true (or dev mode) accepts the empty token."""
    url = "sqlite+aiosqlite:///unused.db"
    with pytest.raises(ValidationError) as caught:
        make_settings(url, tmp_path, metrics_token=SecretStr(""))
    assert "REMINDERS_METRICS_TOKEN is empty" in str(caught.value)
    assert make_settings(url, tmp_path, metrics_token=SecretStr(""), metrics_public=True)
    assert make_settings(url, tmp_path, metrics_token=SecretStr(""), dev_mode=True)


async def test_a_reading_slower_than_the_readiness_probe_still_counts(container, monkeypatch):
    """The audit of a large ledger takes seconds: a reading is bounded by the metrics
    interval, not by the readiness probe's 2 s (before: every such reading timed out and
    the gauges said reminders_ledger_up 0)."""
    from app.services import ledger_metrics

    real_audit = ledger_metrics.run_audit

    async def slow_audit(conn, *, now):
        await asyncio.sleep(container.settings.readyz_timeout_seconds + 0.3)
        return await real_audit(conn, now=now)

    monkeypatch.setattr(ledger_metrics, "run_audit", slow_audit)
    snapshot = await container.ledger_metrics.refresh()
    assert snapshot.figures is not None and snapshot.audit is not None
