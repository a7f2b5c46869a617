"""The Cloud Tasks publisher against gcloud-tasks-emulator: the tasks it creates, when the
emulator dispatches them, and how a name Cloud Tasks already holds is treated."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

import grpc
import orjson
import pytest
from aiohttp import web
from google.cloud import tasks_v2

from app.adapters.push_formats.signatures import sign
from app.adapters.queues.cloudtasks.publisher import (
    CloudTasksPublisher,
    CloudTasksTarget,
    cloudtasks_client_factory,
    task_id,
)
from app.domain.messages import DeliveryPayload, OutgoingMessage
from tests.support.channel_servers import serve
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT

pytestmark = pytest.mark.anyio

SECRET = b"push-secret-current"


def outgoing(queue: str, n: int = 1, delay: float = 0.0) -> OutgoingMessage:
    payload = DeliveryPayload(f"r{n}", "email", 1).to_json()
    return OutgoingMessage(queue, payload, delay, f"r{n}:email:v1")


@dataclass
class Receiver:
    """Records each dispatched task (arrival time, headers, body); answers from a script."""

    script: list[int] = field(default_factory=list)
    arrivals: list[tuple[float, Mapping[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.arrivals.append((time.time(), request.headers.copy(), await request.read()))
        return web.Response(status=self.script.pop(0) if self.script else 200)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    recorder = Receiver()
    app = web.Application()
    app.router.add_post("/push/{queue}", recorder.handle)
    async with serve(app) as base_url:
        yield recorder, base_url


async def make_queue(factory, target: CloudTasksTarget, queue: str) -> None:
    admin = factory()
    path = target.queue_path(queue)
    await admin.create_queue(parent=path.rsplit("/queues/", 1)[0], queue=tasks_v2.Queue(name=path))
    await admin.transport.close()


async def wait_for(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the emulator did not dispatch in time"
        await asyncio.sleep(0.05)


async def test_a_task_reaches_the_push_route_signed_and_not_before_its_schedule(
    tasks_emulator_host, receiver
):
    """The emulator POSTs our JSON body to /push/{queue}, HMAC-signed, at schedule_time."""
    recorder, base_url = receiver
    factory = cloudtasks_client_factory(tasks_emulator_host)
    target = CloudTasksTarget(EMULATOR_PROJECT, EMULATOR_LOCATION, base_url, SECRET, "X-Sig")
    await make_queue(factory, target, "dispatch-q")
    publisher = CloudTasksPublisher(target, client_factory=factory)
    published_at = time.time()
    message_id = await publisher.publish(outgoing("dispatch-q", delay=1.5))
    await wait_for(lambda: recorder.arrivals)
    arrived_at, headers, body = recorder.arrivals[0]
    assert arrived_at >= published_at + 1.5
    assert orjson.loads(body) == outgoing("dispatch-q").payload
    assert headers["X-Sig"] == sign(SECRET, body)
    assert headers["Content-Type"] == "application/json"
    assert headers["X-CloudTasks-TaskName"] == message_id == task_id("r1:email:v1")
    assert headers["X-CloudTasks-TaskRetryCount"] == "0"
    await publisher.aclose()


async def test_a_failed_dispatch_is_retried_by_the_queue(tasks_emulator_host, receiver):
    """A 503 answer makes the emulator dispatch the same task again, retry count raised."""
    recorder, base_url = receiver
    recorder.script = [503]
    factory = cloudtasks_client_factory(tasks_emulator_host)
    target = CloudTasksTarget(EMULATOR_PROJECT, EMULATOR_LOCATION, base_url, SECRET, "X-Sig")
    await make_queue(factory, target, "retry-q")
    publisher = CloudTasksPublisher(target, client_factory=factory)
    await publisher.publish(outgoing("retry-q"))
    await wait_for(lambda: len(recorder.arrivals) >= 2)
    counts = [headers["X-CloudTasks-TaskRetryCount"] for _, headers, _ in recorder.arrivals]
    assert counts[:2] == ["0", "1"]
    await publisher.aclose()


async def test_with_a_service_account_the_task_carries_an_oidc_token_not_an_hmac(
    tasks_emulator_host,
):
    """OIDC configured: the task asks Google for a token (audience = push URL), no HMAC."""
    factory = cloudtasks_client_factory(tasks_emulator_host)
    target = CloudTasksTarget(
        EMULATOR_PROJECT,
        EMULATOR_LOCATION,
        "https://reminders.example.test",
        SECRET,
        "X-Sig",
        oidc_service_account="pusher@test-project.iam.gserviceaccount.com",
    )
    await make_queue(factory, target, "oidc-q")
    admin = factory()
    await admin.pause_queue(name=target.queue_path("oidc-q"))
    publisher = CloudTasksPublisher(target, client_factory=factory)
    await publisher.publish(outgoing("oidc-q", delay=60))
    [task] = [t async for t in await admin.list_tasks(parent=target.queue_path("oidc-q"))]
    request = task.http_request
    assert request.url == "https://reminders.example.test/push/oidc-q"
    assert request.oidc_token.service_account_email == target.oidc_service_account
    assert request.oidc_token.audience == "https://reminders.example.test/push/oidc-q"
    assert "X-Sig" not in request.headers
    await publisher.aclose()
    await admin.transport.close()


class ExistingNames:
    """Cloud Tasks' documented answer to a task name it holds: ALREADY_EXISTS.

    gcloud-tasks-emulator accepts a repeated name, so this one behaviour is shown by a
    gRPC server speaking the real CreateTask method with Google's own message types.
    """

    def __init__(self) -> None:
        self.names: list[str] = []

    async def create_task(self, request: tasks_v2.CreateTaskRequest, context) -> tasks_v2.Task:
        if request.task.name in self.names:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, "task exists")
        self.names.append(request.task.name)
        return request.task


async def test_already_exists_counts_as_published():
    """A repeated key maps to the same task name; ALREADY_EXISTS returns the same id."""
    names = ExistingNames()
    handler = grpc.method_handlers_generic_handler(
        "google.cloud.tasks.v2.CloudTasks",
        {
            "CreateTask": grpc.unary_unary_rpc_method_handler(
                names.create_task,
                request_deserializer=tasks_v2.CreateTaskRequest.deserialize,
                response_serializer=tasks_v2.Task.serialize,
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        target = CloudTasksTarget("p-1", "here", "http://127.0.0.1:9", SECRET)
        publisher = CloudTasksPublisher(
            target,
            client_factory=cloudtasks_client_factory(f"127.0.0.1:{port}"),
            clock=lambda: datetime(2026, 8, 10, tzinfo=UTC),
        )
        first = await publisher.publish(outgoing("q-1", 1))
        again = await publisher.publish(outgoing("q-1", 1))
        other = await publisher.publish(outgoing("q-1", 2))
        assert first == again != other
        assert len(names.names) == 2
        await publisher.aclose()
    finally:
        await server.stop(None)
