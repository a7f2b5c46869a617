"""Drill: Cloud Tasks deletes a task after its last attempt, before our backoff is due; the
reminder is still sent once. gcloud-tasks-emulator with ``--max-retries`` (it drops a task
once its retries are spent) dispatches to a real ``reminders serve``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.adapters.queues.cloudtasks.publisher import cloudtasks_client_factory
from tests.e2e.drills import (
    DRILL_SETTINGS,
    assert_only_our_retry_is_owed,
    catch_up_and_send_once,
    fail_once_for_longer_than_the_queue_waits,
)
from tests.e2e.google import google_env, start_deployment
from tests.e2e.processes import wait_until
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT, tasks_emulator

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MAX_RETRIES = 2  # the emulator's -r: 1 + MAX_RETRIES dispatches, then the task is dropped


@pytest.fixture(scope="module")
def dropping_emulator_host(tmp_path_factory):
    """A Cloud Tasks emulator of its own that gives up after MAX_RETRIES retries."""
    with tasks_emulator(tmp_path_factory.mktemp("dropping"), max_retries=MAX_RETRIES) as host:
        yield host


@pytest.fixture
async def deployment(clean_database_url, tmp_path, dropping_emulator_host, processes):
    env = google_env(
        clean_database_url, tmp_path, "cloudtasks", dropping_emulator_host, **DRILL_SETTINGS
    )
    return await start_deployment(env, "cloudtasks", tmp_path, processes)


async def queued_tasks(emulator_host: str, queue: str) -> list:
    """The tasks the emulator still holds in ``queue``."""
    client = cloudtasks_client_factory(emulator_host)()
    parent = f"projects/{EMULATOR_PROJECT}/locations/{EMULATOR_LOCATION}/queues/{queue}"
    try:
        return [task async for task in await client.list_tasks(parent=parent)]
    finally:
        await client.transport.close()


async def test_a_task_dropped_after_its_last_attempt_still_ends_in_one_send(
    deployment, endpoint, ledger, dropping_emulator_host
):
    """429 with Retry-After 600 once → we nack, our retry due in 600 s; the emulator retries
    at once, we answer `busy` until its retries are spent and it drops the task. Past that and
    the catch-up margin the sweep republishes: one accepted send, in the ledger and the
    provider's own count."""
    fail_once_for_longer_than_the_queue_waits(endpoint)
    await deployment.register("r-ct-drill", datetime.now(UTC), endpoint.url)
    assert (await deployment.sweep())["enqueued"] == 1

    async def spent() -> bool:
        return sum((await deployment.outcomes()).values()) == 1 + MAX_RETRIES

    await wait_until(spent, timeout=60, what="the task's last dispatch")
    assert await deployment.outcomes() == {"retry": 1, "busy": MAX_RETRIES}
    assert await queued_tasks(dropping_emulator_host, deployment.queue) == []
    await assert_only_our_retry_is_owed(ledger, endpoint)
    await catch_up_and_send_once(deployment, ledger, endpoint, busy=MAX_RETRIES)
