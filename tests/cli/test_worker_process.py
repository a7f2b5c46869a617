"""``reminders worker`` as a real process: delivers from the fake Infrai, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.adapters.queues.infrai.publisher import InfraiPublisher
from tests.support.fake_infrai import API_KEY
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.infrai_fixtures import make_api
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REMINDERS = Path(sys.executable).with_name("reminders")


async def until(predicate, *, seconds: float = 20.0) -> None:
    """Poll a condition on a real process, with a deadline."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_worker_process_delivers_then_stops_gracefully_on_sigterm(
    client, container, fake_infrai, infrai_http, sleeps, clock, settings, tmp_path
):
    """The worker sends a swept reminder, acks it, and exits 0 on SIGTERM."""
    clock.set(datetime.now(UTC))  # the process runs on the real clock
    fake_infrai.add_queue("reminders-dlq")
    fake_infrai.add_queue("reminders", dead_letter_queue="reminders-dlq", max_retries=20)
    container.publisher = InfraiPublisher(make_api(infrai_http, fake_infrai.base_url, sleep=sleeps))
    await put_customer(client, "cust_1")
    await put_reminder(client, "renewal:cust_1", customer_id="cust_1", due_at=clock.now)
    assert (await sweep(client))["messages"] == 1
    env = {
        **os.environ,
        "REMINDERS_DATABASE_URL": settings.database_url,
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_QUEUE": "infrai",
        "REMINDERS_INFRAI_BASE_URL": fake_infrai.base_url,
        "REMINDERS_INFRAI_API_KEY": API_KEY,
        "REMINDERS_INFRAI_WORKER_IDLE_MIN_SECONDS": "0.05",
        "REMINDERS_INFRAI_WORKER_IDLE_MAX_SECONDS": "0.2",
        "REMINDERS_OUTBOX_DIR": str(tmp_path / "worker-outbox"),
        "REMINDERS_OUTBOX_FSYNC": "false",
    }
    process = await asyncio.create_subprocess_exec(
        str(REMINDERS),
        "worker",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await until(lambda: fake_infrai.calls_to("/v1/queue/ack"))
        assert fake_infrai.queues["reminders"].messages == []
        polls = len(fake_infrai.calls_to("/v1/queue/consume"))
        await until(lambda: len(fake_infrai.calls_to("/v1/queue/consume")) > polls + 2)
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = output.decode()
    assert process.returncode == 0, text
    assert "worker stopped: 1 deliveries, 1 acked" in text
    [startup] = [line for line in text.splitlines() if "reminders.startup" in line]
    assert "reminders worker starting: database " in startup
    assert "queues email=infrai/reminders webhook=infrai/reminders" in startup
    assert len(list((tmp_path / "worker-outbox").rglob("*.eml"))) == 1
