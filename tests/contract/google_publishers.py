"""Contract factories for the Google publishers, each against its real emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
from google.cloud import tasks_v2

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.cloudtasks.publisher import (
    CloudTasksPublisher,
    CloudTasksTarget,
    cloudtasks_client_factory,
)
from app.adapters.queues.pubsub.api import PubSubApi, PubSubApiError
from app.adapters.queues.pubsub.publisher import PubSubPublisher
from tests.contract.publishers import (
    CONTRACT_QUEUE,
    HeldMessage,
    PublisherEnv,
    PublisherUnderTest,
)
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT

NOT_SHOWN_HERE = "this emulator cannot show publish deduplication"


@asynccontextmanager
async def cloudtasks_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """Cloud Tasks on gcloud-tasks-emulator; the queue is paused so tasks stay held.

    The emulator accepts a repeated task name, so key deduplication (ALREADY_EXISTS) is
    not shown here.
    """
    factory = cloudtasks_client_factory(env.request.getfixturevalue("tasks_emulator_host"))
    target = CloudTasksTarget(EMULATOR_PROJECT, EMULATOR_LOCATION, "http://127.0.0.1:9")
    admin = factory()
    queue_path = target.queue_path(CONTRACT_QUEUE)
    parent = queue_path.rsplit("/queues/", 1)[0]
    await admin.create_queue(parent=parent, queue=tasks_v2.Queue(name=queue_path))
    await admin.pause_queue(name=queue_path)
    await admin.purge_queue(name=queue_path)

    async def held() -> list[HeldMessage]:
        now = env.clock()
        tasks = [task async for task in await admin.list_tasks(parent=queue_path)]
        tasks.sort(key=lambda task: task.schedule_time)  # batches are created concurrently
        return [
            HeldMessage(
                task.name.rsplit("/", 1)[-1],
                CONTRACT_QUEUE,
                orjson.loads(task.http_request.body),
                (task.schedule_time - now).total_seconds(),
            )
            for task in tasks
        ]

    publisher = CloudTasksPublisher(target, client_factory=factory, clock=env.clock)
    try:
        yield PublisherUnderTest(publisher, held, deduplicates=False)
    finally:
        await publisher.aclose()
        await admin.transport.close()


@asynccontextmanager
async def pubsub_publisher(env: PublisherEnv) -> AsyncIterator[PublisherUnderTest]:
    """Pub/Sub on its emulator: what a pull subscription on the topic receives."""
    http = SharedHttp()
    host = env.request.getfixturevalue("pubsub_emulator_host")
    api = PubSubApi(EMULATOR_PROJECT, http, emulator_host=host)
    subscription = f"{CONTRACT_QUEUE}-held"
    await _recreate(api, subscription)
    received: list[HeldMessage] = []

    async def held() -> list[HeldMessage]:
        path = f"{api.subscription_path(subscription)}"
        answer = await api.call(
            "POST", f"{path}:pull", {"maxMessages": 1000, "returnImmediately": True}
        )
        pulled = answer.get("receivedMessages", [])
        if pulled:
            ack_ids = [m["ackId"] for m in pulled]
            await api.call("POST", f"{path}:acknowledge", {"ackIds": ack_ids})
        received.extend(_held(m["message"]) for m in pulled)
        # The emulator numbers messages in publish order; pulls may come back in any order.
        received.sort(key=lambda message: int(message.message_id))
        return list(received)

    try:
        yield PublisherUnderTest(PubSubPublisher(api), held, deduplicates=False)
    finally:
        await http.aclose()


async def _recreate(api: PubSubApi, subscription: str) -> None:
    for path in (api.subscription_path(subscription), api.topic_path(CONTRACT_QUEUE)):
        try:
            await api.call("DELETE", path)
        except PubSubApiError as error:
            if error.status != 404:
                raise
    await api.call("PUT", api.topic_path(CONTRACT_QUEUE), {})
    await api.call(
        "PUT", api.subscription_path(subscription), {"topic": api.topic_path(CONTRACT_QUEUE)}
    )


def _held(message: dict) -> HeldMessage:
    import base64

    payload = orjson.loads(base64.b64decode(message["data"]))
    return HeldMessage(message["messageId"], CONTRACT_QUEUE, payload, 0.0)
