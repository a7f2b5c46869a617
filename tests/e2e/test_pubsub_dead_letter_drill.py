"""Drill: Pub/Sub dead-letters a message before our retry is due; the reminder is still sent
once. The real Pub/Sub emulator pushes to a real ``reminders serve``; the subscription has a
dead-letter policy and no retry policy (with one, the emulator stops pushing messages refused
three times or more and never dead-letters them: an emulator bug)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.pubsub.api import PubSubApi
from tests.e2e.drills import (
    DRILL_SETTINGS,
    assert_only_our_retry_is_owed,
    catch_up_and_send_once,
    fail_once_for_longer_than_the_queue_waits,
)
from tests.e2e.google import google_env, start_deployment
from tests.e2e.processes import wait_until
from tests.support.google_emulators import EMULATOR_PROJECT

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DELIVERY_ATTEMPTS = 5  # Pub/Sub's minimum maxDeliveryAttempts


@pytest.fixture
async def deployment(clean_database_url, tmp_path, pubsub_emulator_host, processes):
    env = google_env(
        clean_database_url, tmp_path, "pubsub", pubsub_emulator_host,
        REMINDERS_PUBSUB_MIN_BACKOFF_SECONDS="0",  # no retry policy: see the module docstring
        REMINDERS_PUBSUB_MAX_DELIVERY_ATTEMPTS=str(DELIVERY_ATTEMPTS),
        REMINDERS_MAX_ATTEMPTS=str(DELIVERY_ATTEMPTS - 1),
        **DRILL_SETTINGS,
    )  # fmt: skip
    return await start_deployment(env, "pubsub", tmp_path, processes)


@pytest.fixture
async def pubsub(pubsub_emulator_host):
    http = SharedHttp()
    yield PubSubApi(EMULATOR_PROJECT, http, emulator_host=pubsub_emulator_host)
    await http.aclose()


async def tap_dead_letters(pubsub: PubSubApi, queue: str) -> str:
    """A pull subscription on the queue's dead-letter topic (nobody reads it in production)."""
    tap = pubsub.subscription_path(f"{queue}-dead-tap")
    await pubsub.call("PUT", tap, {"topic": pubsub.topic_path(f"{queue}-dead")})
    return tap


async def dead_lettered(pubsub: PubSubApi, tap: str) -> list[dict]:
    """The payloads waiting on the tap (acknowledged as they are read)."""
    # returnImmediately: deprecated on Google, but the emulator would otherwise hold the call.
    pull = {"maxMessages": 10, "returnImmediately": True}
    answer = await pubsub.call("POST", f"{tap}:pull", pull)
    received = answer.get("receivedMessages", [])
    if received:
        ack_ids = [item["ackId"] for item in received]
        await pubsub.call("POST", f"{tap}:acknowledge", {"ackIds": ack_ids})
    return [json.loads(base64.b64decode(item["message"]["data"])) for item in received]


async def test_a_message_dead_lettered_before_our_backoff_still_ends_in_one_send(
    deployment, endpoint, ledger, pubsub
):
    """429 with Retry-After 600 once → we nack, our retry due in 600 s; Pub/Sub redelivers at
    once, we answer `busy` until its 5 attempts are spent and it dead-letters the message.
    Past that and the catch-up margin the sweep republishes it: one accepted send, in the
    ledger and the provider's own count."""
    tap = await tap_dead_letters(pubsub, deployment.queue)
    fail_once_for_longer_than_the_queue_waits(endpoint)
    await deployment.register("r-ps-drill", datetime.now(UTC), endpoint.url)
    assert (await deployment.sweep())["enqueued"] == 1

    dropped: list[dict] = []

    async def gave_up() -> bool:
        dropped.extend(await dead_lettered(pubsub, tap))
        return bool(dropped)

    await wait_until(gave_up, timeout=60, what="the dead-lettered message")
    assert [payload["reminder_id"] for payload in dropped] == ["r-ps-drill"]
    outcomes = await deployment.outcomes()
    assert outcomes == {"retry": 1, "busy": DELIVERY_ATTEMPTS - 1}
    await assert_only_our_retry_is_owed(ledger, endpoint)
    await catch_up_and_send_once(deployment, ledger, endpoint, busy=DELIVERY_ATTEMPTS - 1)
    assert not await dead_lettered(pubsub, tap)
