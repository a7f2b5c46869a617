"""``reminders embedded-dead``: list the embedded queue's dead list and redrive from it."""

import json
import random

import anyio
import pytest
from typer.testing import CliRunner

from app.adapters.queues.embedded.dispatcher import Dispatcher, DispatchLimits
from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.adapters.queues.embedded.pusher import PushFailed, PushTarget
from app.cli import cli
from app.db import queue_repo
from app.db.engine import create_engine
from app.domain.messages import OutgoingMessage
from app.domain.retry import BackoffPolicy
from tests.support.cli_env import service_env
from tests.support.push import PUSH_SECRET

pytestmark = pytest.mark.anyio


class Unreachable:
    """A receiver that never answers: every push fails like a refused connection."""

    async def post(self, url, body, headers, *, timeout):
        raise PushFailed("connection refused")


@pytest.fixture
def cli_env(settings, monkeypatch):
    for name, value in service_env(settings).items():
        monkeypatch.setenv(name, value)


async def invoke(*args: str):
    runner = CliRunner()
    return await anyio.to_thread.run_sync(lambda: runner.invoke(cli, ["embedded-dead", *args]))


async def test_list_then_redrive_a_dead_message(settings, clock, cli_env):
    """A message whose redeliveries ran out is listed, redriven, and ready again."""
    engine = create_engine(settings.database_url)
    try:
        publisher = EmbeddedQueuePublisher(engine, max_retries=0, clock=clock)
        payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
        message_id = await publisher.publish(OutgoingMessage("reminders", payload, 0, "r1:e:v1"))
        dispatcher = Dispatcher(
            engine, Unreachable(), PushTarget("http://127.0.0.1:9", PUSH_SECRET.encode()),
            limits=DispatchLimits(backoff=BackoffPolicy(1.0, 5.0)), clock=clock,
            rand=random.Random(1),
        )  # fmt: skip
        await dispatcher.run_once()
        listed = await invoke("list")
        assert listed.exit_code == 0, listed.output
        [item] = json.loads(listed.stdout)["items"]
        assert (item["message_id"], item["payload"]) == (message_id, payload)
        redriven = await invoke("redrive", message_id)
        assert json.loads(redriven.stdout) == {"redriven": [message_id], "count": 1}
        async with engine.connect() as conn:
            assert (await queue_repo.count_by_state(conn))["ready"] == 1
        assert json.loads((await invoke("list")).stdout)["items"] == []
        assert (await invoke("redrive", message_id)).exit_code == 1  # no longer dead
    finally:
        await engine.dispose()
