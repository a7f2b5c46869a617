"""``reminders check`` and ``reminders setup-infrai`` against the fake Infrai on loopback."""

from __future__ import annotations

import socket

import pytest

from tests.support.cli import invoke, set_env
from tests.support.fake_infrai import API_KEY, DISCOVERY_FIXTURE
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

pytestmark = pytest.mark.anyio


@pytest.fixture
def infrai_env(fake_infrai, monkeypatch, tmp_path):
    """A deployment's environment: one queue per channel, Infrai at the fake."""
    env = {
        "REMINDERS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/unused.db",
        "REMINDERS_PUSH_SECRETS": f"{PUSH_SECRET},{NEXT_PUSH_SECRET}",
        "REMINDERS_API_TOKEN": "test-api-token-5f0c9a1e7b3d42c8a6e0f1",
        "REMINDERS_CRON_TOKEN": "test-cron-token-9b2e4d6f8a0c1e3b5d7f90-0123456789",
        "REMINDERS_ADMIN_TOKEN": "test-admin-token-c4a8e2f6b0d3917a5e2c4b",
        "REMINDERS_METRICS_TOKEN": "test-metrics-token-6a3f1c9e7d5b2a8f0e4c",
        "REMINDERS_QUEUE": "infrai",
        "REMINDERS_PUBLIC_BASE_URL": "https://reminders.example.com",
        "REMINDERS_EMAIL_QUEUE": "reminders-email",
        "REMINDERS_WEBHOOK_QUEUE": "reminders-webhook",
        "REMINDERS_INFRAI_BASE_URL": fake_infrai.base_url,
        "REMINDERS_INFRAI_API_KEY": API_KEY,
        "REMINDERS_INFRAI_MAX_ATTEMPTS": "1",
        "COLUMNS": "250",
    }
    return set_env(monkeypatch, env)


async def test_setup_dry_run_prints_the_calls_with_secrets_masked(infrai_env, fake_infrai):
    """--dry-run makes no call and never prints the push secret or the cron token."""
    result = await invoke("setup-infrai", "--dry-run")
    assert result.exit_code == 0, result.output
    assert fake_infrai.calls == []
    assert "/v1/queue/create" in result.output and "/v1/cron/create" in result.output
    assert "https://reminders.example.com/push/reminders-email" in result.output
    assert '"token": "***"' in result.output and '"secret": "***"' in result.output
    assert PUSH_SECRET not in result.output
    assert infrai_env["REMINDERS_CRON_TOKEN"] not in result.output


async def test_setup_then_check_passes(infrai_env, fake_infrai):
    """After setup-infrai, check passes: schemas accept our bodies, queues and cron exist."""
    setup = await invoke("setup-infrai")
    assert setup.exit_code == 0, setup.output
    assert setup.output.count("created") == 5 and setup.output.count("subscribed") == 2
    again = await invoke("setup-infrai")
    assert again.exit_code == 0 and "created" not in again.output
    check = await invoke("check")
    assert check.exit_code == 0, check.output
    assert "check passed" in check.output
    assert "queue.publish (reminders-email)" in check.output
    assert "max_retries 20 > 8" in check.output
    # Nack is seen in client code but not published: a warning, not a failure.
    assert "queue.nack" in check.output and "WARN" in check.output


@pytest.mark.parametrize(
    ("capability", "drift", "expected"),
    [
        ("queue.publish", lambda p: p["properties"]["delay_seconds"].update(maximum=259200),
         "delay_seconds: 604800 is greater than the maximum of 259200"),
        ("queue.publish", lambda p: p["properties"].pop("idempotency_key"),
         "Additional properties are not allowed ('idempotency_key' was unexpected)"),
        ("queue.publish", lambda p: p["required"].append("priority"),
         "'priority' is a required property"),
        ("queue.create", lambda p: p["properties"]["max_retries"].update(maximum=10),
         "max_retries: 20 is greater than the maximum of 10"),
        ("cron.create", lambda p: p["properties"]["payload"].update(maxProperties=0),
         "payload: fails maxProperties 0"),
    ],
)  # fmt: skip
async def test_check_fails_loudly_when_the_published_schema_drifts(
    infrai_env, fake_infrai, capability, drift, expected
):
    """A schema change that our real bodies break: non-zero exit naming the field."""
    await invoke("setup-infrai")
    drift(fake_infrai.discovery["capabilities"][capability]["parameters"])
    result = await invoke("check")
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.output and "check failed" in result.output
    assert expected in result.output
    assert infrai_env["REMINDERS_CRON_TOKEN"] not in result.output


async def test_check_fails_when_a_route_moves(infrai_env, fake_infrai):
    """Discovery publishes consume elsewhere: the failure names the setting to change."""
    await invoke("setup-infrai")
    [entry] = [
        c for c in fake_infrai.discovery["index"]["capabilities"] if c["id"] == "queue.consume"
    ]
    entry["path"] = "/v1/queue/receive"
    result = await invoke("check")
    assert result.exit_code == 1
    assert "published as POST /v1/queue/receive" in result.output
    assert "REMINDERS_INFRAI_*_PATH" in result.output


async def test_check_fails_when_a_documented_capability_disappears(infrai_env, fake_infrai):
    """queue.publish missing from the index is a failure, not a warning."""
    await invoke("setup-infrai")
    index = fake_infrai.discovery["index"]
    index["capabilities"] = [c for c in index["capabilities"] if c["id"] != "queue.publish"]
    result = await invoke("check")
    assert result.exit_code == 1
    assert "not in discovery (we call /v1/queue/publish)" in result.output


async def test_check_fails_when_queue_max_retries_is_not_above_our_ceiling(infrai_env, fake_infrai):
    """A queue that would dead-letter before our ledger does fails the check."""
    await invoke("setup-infrai")
    fake_infrai.queues["reminders-webhook"].max_retries = 8
    result = await invoke("check")
    assert result.exit_code == 1
    assert "max_retries 8 <= REMINDERS_MAX_ATTEMPTS 8" in result.output


async def test_check_fails_when_queues_are_missing(infrai_env, fake_infrai):
    """Before setup: the queues are missing and the check says to run setup-infrai."""
    result = await invoke("check")
    assert result.exit_code == 1
    assert "missing: run `reminders setup-infrai`" in result.output


async def test_check_works_offline_from_a_recorded_discovery_file(
    infrai_env, fake_infrai, monkeypatch
):
    """--discovery-file and --skip-queues: no network at all (Infrai unreachable) and a pass."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    monkeypatch.setenv("REMINDERS_INFRAI_BASE_URL", closed)
    result = await invoke("check", "--discovery-file", str(DISCOVERY_FIXTURE), "--skip-queues")
    assert result.exit_code == 0, result.output
    assert "check passed" in result.output
    assert fake_infrai.calls == []
