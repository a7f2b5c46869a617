"""The cut-over drill: reminders half delivered through the embedded queue, then the
configuration switched to Pub/Sub while messages are in flight in both queues (a rolling
deploy: the old process drains its embedded queue while the new one takes Pub/Sub's pushes,
both on one database). Every reminder is sent exactly once: the ledger, the customer's
webhook endpoint and the email outbox agree."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.pubsub.api import PubSubApi
from app.adapters.queues.pubsub.publisher import PubSubPublisher
from app.domain.messages import DeliveryPayload, OutgoingMessage, idempotency_key
from tests.e2e.google import Deployment, start_deployment
from tests.e2e.processes import free_port, serve, service_env, wait_healthy, wait_until
from tests.support.google_emulators import EMULATOR_PROJECT

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CHANNELS = ("email", "webhook")
HELD_SECONDS = 15  # the later five stay in the embedded queue until after the switch


async def start_embedded(env: dict[str, str], tmp_path, processes) -> Deployment:
    """The old deployment: the embedded queue, its dispatcher inside ``serve``."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = env | {"REMINDERS_PUBLIC_BASE_URL": base_url}
    server = serve(env, port, tmp_path / "serve-embedded.log").start()
    processes.append(server)
    await wait_healthy(base_url, server)
    return Deployment(base_url, env["REMINDERS_QUEUE_NAME"], env, server)


async def republish_to_pubsub(host: str, queue: str, reminder_id: str) -> None:
    """What the sweep's catch-up does for a lost message: the same payload, a new key."""
    http = SharedHttp()
    publisher = PubSubPublisher(PubSubApi(EMULATOR_PROJECT, http, emulator_host=host))
    for channel in CHANNELS:
        payload = DeliveryPayload(reminder_id, channel, 1).to_json()
        key = idempotency_key(reminder_id, channel, 1) + ":drill"
        await publisher.publish(OutgoingMessage(queue, payload, 0, key))
    await http.aclose()


async def test_switching_from_embedded_to_pubsub_in_flight_sends_each_reminder_once(
    clean_database_url, tmp_path, endpoint, ledger, processes, pubsub_emulator_host
):
    """Five reminders sent through the embedded queue, five held in it (due in 15 s), then
    the switch: five new ones through Pub/Sub, and one held reminder also republished to
    Pub/Sub, so it is in flight in both queues. 15 reminders x 2 channels: 30 sends."""
    queue = f"drill-{uuid.uuid4().hex[:8]}"
    outbox = tmp_path / "outbox"
    old_env = service_env(clean_database_url, outbox, REMINDERS_QUEUE_NAME=queue)
    old = await start_embedded(old_env, tmp_path, processes)
    new_env = old_env | {
        "REMINDERS_QUEUE": "pubsub",
        "REMINDERS_PUBSUB_PROJECT": EMULATOR_PROJECT,
        "PUBSUB_EMULATOR_HOST": pubsub_emulator_host,
    }
    # The new configuration's process is started (queue set up) but takes work only after
    # the old one has sent half and still holds half: a rolling deploy.
    new = await start_deployment(new_env, "pubsub", tmp_path, processes)
    now = datetime.now(UTC)
    for n in range(10):
        due = now if n < 5 else now + timedelta(seconds=HELD_SECONDS)
        await old.register(f"drill-{n}", due, endpoint.url, CHANNELS)
    assert (await old.sweep())["enqueued"] == 10
    await old.wait_sent(ledger, 10, timeout=30)  # the first five, both channels

    async def later_five_held() -> bool:  # acknowledged messages leave the queue
        return (await ledger.queue())["ready"] == 10

    await wait_until(later_five_held, timeout=10, what="the first acknowledgements")
    for n in range(10, 15):
        await new.register(f"drill-{n}", datetime.now(UTC), endpoint.url, CHANNELS)
    assert (await new.sweep())["enqueued"] == 5
    assert datetime.now(UTC) < now + timedelta(seconds=HELD_SECONDS), "switched too late"
    await republish_to_pubsub(pubsub_emulator_host, queue, "drill-5")

    await new.wait_sent(ledger, 30, timeout=60)
    rows = [row for row in await ledger.rows() if row["channel"]]
    assert len(rows) == 30 and {r["state"] for r in rows} == {"sent"}
    assert {(r["reminder_id"], r["channel"]) for r in rows} == {
        (f"drill-{n}", channel) for n in range(15) for channel in CHANNELS
    }
    # One webhook-id per reminder. (A send whose answer came back after our provider
    # timeout is retried with the same webhook-id, which receivers deduplicate on.)
    assert set(endpoint.accepted) == {f"drill-{n}:webhook:webhook" for n in range(15)}
    assert len(list((outbox / "email").glob("*.eml"))) == 15

    async def both_queues_delivered_drill_5() -> bool:  # the later arrival: `duplicate`
        counts = [(await d.outcomes()).get("duplicate", 0) for d in (old, new)]
        return sum(counts) == 2 and (await ledger.queue())["ready"] == 0

    await wait_until(both_queues_delivered_drill_5, timeout=30, what="drill-5's duplicates")
