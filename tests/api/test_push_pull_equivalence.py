"""The pull worker and the push route are two doors to one receiver: same ledger results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from app.adapters.queues.infrai.consumer import InfraiConsumer
from app.adapters.queues.infrai.publisher import InfraiPublisher
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult
from app.services.pull_worker import PullWorkerConfig, WorkerStats, poll_once
from tests.conftest import make_settings
from tests.support.flow import API, put_customer, put_reminder, sweep
from tests.support.infrai_fixtures import make_api
from tests.support.push import PUSH_SECRET
from tests.support.rows import dead_letter_rows, send_record_rows

pytestmark = pytest.mark.anyio

QUEUES = ("reminders-email", "reminders-webhook")


@dataclass
class ProviderByRecipient:
    """Scripted per recipient, so results do not depend on the order deliveries arrive in."""

    name: str = "scripted"
    script: dict[str, list[Exception]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        self.calls.append(message.recipient)
        steps = self.script.get(message.recipient, [])
        if steps:
            raise steps.pop(0)
        return SendResult(f"req-{len(self.calls)}")


@pytest.fixture
def settings(clean_database_url, tmp_path):
    """One queue per channel (max_attempts 3, lease 60 s)."""
    return make_settings(
        clean_database_url, tmp_path, email_queue=QUEUES[0], webhook_queue=QUEUES[1]
    )


@pytest.fixture
def provider():
    return ProviderByRecipient(
        script={
            "c2@example.com": [TransientProviderError("451 try later")],
            "c3@example.com": [PermanentProviderError("550 no such user")],
            "c4@example.com": [TransientProviderError("timeout")] * 3,
        }
    )


async def register_and_sweep(client, container, fake, api, clock) -> None:
    """Seven reminders due now, swept into Infrai, then changed the ways customers do."""
    for queue in QUEUES:
        fake.add_queue(queue + "-dlq")
        fake.add_queue(queue, dead_letter_queue=queue + "-dlq", max_retries=20)
    container.publisher = InfraiPublisher(api)
    for n in range(1, 8):
        await put_customer(client, f"c{n}", webhook_url=f"https://hooks.example.com/c{n}")
        channels = ("email", "webhook") if n == 2 else ("email",)
        await put_reminder(
            client, f"r{n}", customer_id=f"c{n}", due_at=clock.now, channels=channels
        )
    assert (await sweep(client))["messages"] == 8
    assert (await client.delete("/v1/reminders/r5", headers=API)).status_code == 200
    await put_customer(client, "c6", opted_out_channels=["email"])
    await put_reminder(client, "r7", customer_id="c7", due_at=clock.now + timedelta(days=30))


async def deliver_by_push(client, fake) -> None:
    """The queue pushes every visible message to /push/{queue}, signed."""

    async def post(path, body, headers):
        response = await client.post(path, content=body, headers=headers)
        return response.status_code, dict(response.headers)

    for queue in QUEUES:
        await fake.push_visible(queue, post, secret=PUSH_SECRET)


async def snapshot(container) -> dict:
    records = sorted(
        (r["reminder_id"], r["channel"], r["state"], r["attempt_count"], r["outcome"])
        for r in await send_record_rows(container.engine)
    )
    dead = sorted((d["reminder_id"], d["reason"]) for d in await dead_letter_rows(container.engine))
    return {"send_records": records, "dead_letters": dead}


EXPECTED = {
    "send_records": [
        ("r1", "email", "sent", 1, "sent"),
        ("r2", "email", "sent", 2, "sent"),
        ("r2", "webhook", "sent", 1, "sent"),
        ("r3", "email", "terminal_failure", 1, "terminal"),
        ("r4", "email", "dead", 3, "dead_lettered"),
        ("r5", "email", "terminal_failure", 1, "cancelled"),
        ("r6", "email", "terminal_failure", 1, "suppressed"),
        ("r7", "email", "pending", 1, None),
    ],
    "dead_letters": [("r4", "attempts_exhausted")],
}


@pytest.mark.parametrize("door", ["push", "pull"])
async def test_push_route_and_pull_worker_leave_identical_ledgers(
    door, client, container, fake_infrai, infrai_http, sleeps, clock, provider
):
    """The same deliveries through POST /push/{queue} or the pull worker: the same ledger."""
    api = make_api(infrai_http, fake_infrai.base_url, sleep=sleeps, now=clock)
    await register_and_sweep(client, container, fake_infrai, api, clock)
    consumer = InfraiConsumer(api)
    config = PullWorkerConfig(queues=QUEUES, visibility_timeout=120)
    for _ in range(5):
        if door == "push":
            await deliver_by_push(client, fake_infrai)
        else:
            await poll_once(container.receiver, consumer, config, WorkerStats())
        clock.advance(seconds=700)  # past any retry delay (backoff cap 600 s)
    assert await snapshot(container) == EXPECTED
    assert all(fake_infrai.queues[q].messages == [] for q in QUEUES)
    assert sorted(provider.calls).count("c4@example.com") == 3
