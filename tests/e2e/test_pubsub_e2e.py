"""Pub/Sub end to end: the Pub/Sub emulator pushes to a real ``reminders serve`` through the
subscription ``reminders setup --queue pubsub`` created (``?token=`` authentication)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.pubsub.api import PubSubApi
from app.adapters.queues.pubsub.publisher import PubSubPublisher
from app.domain.messages import DeliveryPayload, OutgoingMessage, idempotency_key
from tests.e2e.google import google_env, start_deployment
from tests.e2e.processes import wait_until
from tests.support.google_emulators import EMULATOR_PROJECT

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
async def deployment(clean_database_url, tmp_path, pubsub_emulator_host, processes):
    env = google_env(clean_database_url, tmp_path, "pubsub", pubsub_emulator_host)
    return await start_deployment(env, "pubsub", tmp_path, processes)


async def test_first_delivery_is_sent_and_a_republished_duplicate_is_not(
    deployment, endpoint, ledger, pubsub_emulator_host
):
    """Sweep → Pub/Sub → push → sent; the same message published again → `duplicate`."""
    await deployment.register("r-ps-1", datetime.now(UTC), endpoint.url)
    assert (await deployment.sweep())["enqueued"] == 1

    await deployment.wait_sent(ledger, 1, timeout=30)
    http = SharedHttp()
    publisher = PubSubPublisher(
        PubSubApi(EMULATOR_PROJECT, http, emulator_host=pubsub_emulator_host)
    )
    payload = DeliveryPayload("r-ps-1", "webhook", 1).to_json()
    key = idempotency_key("r-ps-1", "webhook", 1)
    await publisher.publish(OutgoingMessage(deployment.queue, payload, 0, key))
    await http.aclose()

    async def answered_duplicate() -> bool:
        return (await deployment.outcomes()).get("duplicate", 0) == 1

    await wait_until(answered_duplicate, timeout=30, what="the duplicate answer")
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("sent", 1)
    assert sum(endpoint.accepted.values()) == 1 and len(endpoint.requests) == 1


async def test_a_transient_failure_is_retried_by_pubsub_redelivery(deployment, endpoint, ledger):
    """The webhook answers 503 once: we nack, Pub/Sub redelivers, the second claim sends."""
    endpoint.script = [503]
    await deployment.register("r-ps-2", datetime.now(UTC), endpoint.url)
    await deployment.sweep()

    await deployment.wait_sent(ledger, 1, timeout=60)
    [row] = await ledger.rows()
    assert (row["state"], row["attempt_count"]) == ("sent", 2)
    assert len(endpoint.requests) == 2 and sum(endpoint.accepted.values()) == 1
    assert (await deployment.outcomes()).get("retry", 0) == 1
