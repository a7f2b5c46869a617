"""Cloud Tasks end to end: gcloud-tasks-emulator dispatches the tasks a real ``reminders
serve`` created to its push route (HMAC header on each task)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.google import google_env, start_deployment

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def deployment(clean_database_url, tmp_path, tasks_emulator_host, processes):
    env = google_env(clean_database_url, tmp_path, "cloudtasks", tasks_emulator_host)
    return await start_deployment(env, "cloudtasks", tmp_path, processes)


async def test_a_task_is_delivered_no_earlier_than_its_schedule_time(deployment, endpoint, ledger):
    """A reminder due in 3 s is published at once with schedule_time = due; sent at/after it."""
    due = datetime.now(UTC) + timedelta(seconds=3)
    await deployment.register("r-ct-1", due, endpoint.url)
    assert (await deployment.sweep())["enqueued"] == 1

    await deployment.wait_sent(ledger, 1, timeout=30)
    [row] = await ledger.rows()
    sent_at = row["sent_at"]
    sent_at = sent_at if sent_at.tzinfo else sent_at.replace(tzinfo=UTC)  # SQLite: naive UTC
    assert sent_at >= due
    assert (await deployment.outcomes()) == {"sent": 1}


async def test_a_503_is_retried_by_the_queue(deployment, endpoint, ledger):
    """The webhook answers 503 once: we nack, the emulator dispatches the task again (early
    redeliveries are answered `busy`), and the reminder is sent once."""
    endpoint.script = [503]
    await deployment.register("r-ct-2", datetime.now(UTC), endpoint.url)
    await deployment.sweep()

    await deployment.wait_sent(ledger, 1, timeout=60)
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("sent", 2)
    assert len(endpoint.requests) == 2 and sum(endpoint.accepted.values()) == 1
    outcomes = await deployment.outcomes()
    assert outcomes["retry"] == 1 and outcomes["sent"] == 1
