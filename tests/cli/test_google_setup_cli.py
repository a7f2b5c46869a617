"""``reminders setup --queue pubsub|cloudtasks`` against the emulators: run twice, the second
run creates nothing new; the push token never reaches the output."""

from __future__ import annotations

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.pubsub.api import PubSubApi
from tests.support.cli import invoke, set_env
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

pytestmark = pytest.mark.anyio


@pytest.fixture
def google_env(monkeypatch, tmp_path):
    """A deployment with email and webhooks on their own queues."""
    env = {
        "REMINDERS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/unused.db",
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90-0123456789",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_PUBLIC_BASE_URL": "https://reminders.example.com",
        "REMINDERS_EMAIL_QUEUE": "cli-email",
        "REMINDERS_WEBHOOK_QUEUE": "cli-webhook",
        "REMINDERS_PUBSUB_PROJECT": EMULATOR_PROJECT,
        "REMINDERS_CLOUDTASKS_PROJECT": EMULATOR_PROJECT,
        "REMINDERS_CLOUDTASKS_LOCATION": EMULATOR_LOCATION,
        "COLUMNS": "200",
    }
    return set_env(monkeypatch, env)


async def test_pubsub_setup_twice(google_env, monkeypatch, pubsub_emulator_host):
    """First run creates topics and subscriptions; the second finds and aligns them."""
    monkeypatch.setenv("REMINDERS_QUEUE", "pubsub")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator_host)
    first = await invoke("setup", "--queue", "pubsub")
    assert first.exit_code == 0, first.output
    assert first.output.count("created") == 6
    second = await invoke("setup", "--queue", "pubsub")
    assert second.exit_code == 0, second.output
    assert second.output.count("exists") == 4 and second.output.count("updated") == 2
    assert PUSH_SECRET not in first.output + second.output
    http = SharedHttp()
    api = PubSubApi(EMULATOR_PROJECT, http, emulator_host=pubsub_emulator_host)
    held = await api.call("GET", api.subscription_path("cli-webhook-push"))
    await http.aclose()
    assert held["pushConfig"]["pushEndpoint"] == (
        f"https://reminders.example.com/push/cli-webhook?token={PUSH_SECRET}"
    )


async def test_cloudtasks_setup_twice(google_env, monkeypatch, tasks_emulator_host):
    """Each run sets up one queue per channel queue and exits 0."""
    monkeypatch.setenv("REMINDERS_QUEUE", "cloudtasks")
    monkeypatch.setenv("CLOUD_TASKS_EMULATOR_HOST", tasks_emulator_host)
    for _ in range(2):
        result = await invoke("setup")
        assert result.exit_code == 0, result.output
        assert "cli-email" in result.output and "cli-webhook" in result.output


async def test_setup_of_a_kind_not_in_use_is_refused(google_env, monkeypatch):
    """--queue pubsub while the channels use the embedded queue: exit 2, nothing done."""
    result = await invoke("setup", "--queue", "pubsub")
    assert result.exit_code == 2
    assert "no channel uses the pubsub queue" in result.output


async def test_check_fails_before_setup_and_passes_after(
    google_env, monkeypatch, pubsub_emulator_host
):
    """`reminders check` names the missing subscriptions, then passes once setup ran."""
    monkeypatch.setenv("REMINDERS_QUEUE", "pubsub")
    monkeypatch.setenv("REMINDERS_EMAIL_QUEUE", "check-email")
    monkeypatch.setenv("REMINDERS_WEBHOOK_QUEUE", "check-webhook")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator_host)
    before = await invoke("check")
    assert before.exit_code == 1, before.output
    assert "check-email-push" in before.output and "FAIL" in before.output
    assert (await invoke("setup")).exit_code == 0
    after = await invoke("check")
    assert after.exit_code == 0, after.output
    assert after.output.count("PASS") == 2


async def test_check_of_cloudtasks_queues(google_env, monkeypatch, tasks_emulator_host):
    """Cloud Tasks queues: missing → FAIL; after setup → PASS."""
    monkeypatch.setenv("REMINDERS_QUEUE", "cloudtasks")
    monkeypatch.setenv("REMINDERS_EMAIL_QUEUE", "check-ct-email")
    monkeypatch.setenv("REMINDERS_WEBHOOK_QUEUE", "check-ct-webhook")
    monkeypatch.setenv("CLOUD_TASKS_EMULATOR_HOST", tasks_emulator_host)
    before = await invoke("check")
    assert before.exit_code == 1, before.output
    assert (await invoke("setup")).exit_code == 0
    after = await invoke("check")
    assert after.exit_code == 0, after.output
    assert after.output.count("PASS") == 2
