"""``setup`` for Pub/Sub and Cloud Tasks against their emulators: created, then idempotent."""

from __future__ import annotations

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.cloudtasks.publisher import CloudTasksTarget, cloudtasks_client_factory
from app.adapters.queues.cloudtasks.setup import CloudTasksRetryPlan, setup_cloudtasks
from app.adapters.queues.pubsub.api import PubSubApi
from app.adapters.queues.pubsub.setup import (
    PubSubSubscriptionPlan,
    PushAuth,
    SetupAction,
    setup_pubsub,
)
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pubsub_api(pubsub_emulator_host):
    http = SharedHttp()
    yield PubSubApi(EMULATOR_PROJECT, http, emulator_host=pubsub_emulator_host)
    await http.aclose()


async def test_pubsub_setup_creates_topics_and_a_push_subscription_then_aligns_it(pubsub_api):
    """First run creates; a second run with other settings finds the topics, patches the
    subscription, and the subscription then holds the new configuration."""
    plan = PubSubSubscriptionPlan("http://127.0.0.1:8000", PushAuth(token="tok/en"))
    first = await setup_pubsub(pubsub_api, ["setup-email"], plan)
    assert first == [
        SetupAction("topic", "setup-email-dead", "created"),
        SetupAction("topic", "setup-email", "created"),
        SetupAction("subscription", "setup-email-push", "created"),
    ]
    changed = PubSubSubscriptionPlan(
        "http://127.0.0.1:9000", PushAuth(token="tok/en"), max_delivery_attempts=7
    )
    again = await setup_pubsub(pubsub_api, ["setup-email"], changed)
    assert [action.status for action in again] == ["exists", "exists", "updated"]
    held = await pubsub_api.call("GET", pubsub_api.subscription_path("setup-email-push"))
    assert (
        held["pushConfig"]["pushEndpoint"]
        == "http://127.0.0.1:9000/push/setup-email?token=tok%2Fen"
    )
    assert held["deadLetterPolicy"] == {
        "deadLetterTopic": pubsub_api.topic_path("setup-email-dead"),
        "maxDeliveryAttempts": 7,
    }
    assert held["retryPolicy"] == {"minimumBackoff": "10s", "maximumBackoff": "600s"}
    assert held["ackDeadlineSeconds"] == 60


async def test_cloudtasks_setup_is_idempotent_against_the_emulator(tasks_emulator_host):
    """Running setup twice leaves one queue per channel queue on the emulator."""
    factory = cloudtasks_client_factory(tasks_emulator_host)
    target = CloudTasksTarget(EMULATOR_PROJECT, EMULATOR_LOCATION, "http://127.0.0.1:9")
    client = factory()
    try:
        for _ in range(2):
            actions = await setup_cloudtasks(
                client, target, ["setup-a", "setup-b"], CloudTasksRetryPlan()
            )
            assert [(a.kind, a.name) for a in actions] == [
                ("queue", "setup-a"),
                ("queue", "setup-b"),
            ]
        parent = f"projects/{EMULATOR_PROJECT}/locations/{EMULATOR_LOCATION}"
        names = [q.name async for q in await client.list_queues(parent=parent)]
        assert names.count(target.queue_path("setup-a")) == 1
        assert names.count(target.queue_path("setup-b")) == 1
    finally:
        await client.transport.close()
