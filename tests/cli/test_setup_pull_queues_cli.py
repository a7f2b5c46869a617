"""``reminders setup --queue sqs|rabbitmq`` run as a user runs them (a process, twice): the
second run succeeds and changes nothing but what the settings changed; SQS refuses at
startup a redrive count that would dead-letter what our ledger still retries."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from app.adapters.queues.sqs.client import SqsClient, SqsError
from app.adapters.queues.sqs.setup import dead_letter_queue
from tests.support.cli import deployment_env
from tests.support.rabbit_fixtures import delete_topology
from tests.support.sqs_fixtures import REGION

pytestmark = pytest.mark.anyio

REMINDERS = Path(sys.executable).with_name("reminders")


def deployment(tmp_path: Path, queue: str, **variables: str) -> tuple[dict[str, str], list[str]]:
    """A deployment's variables with email and webhooks on their own uniquely named queues."""
    tag = uuid.uuid4().hex[:10]
    queues = [f"cli-email-{tag}", f"cli-webhook-{tag}"]
    deployed = deployment_env(
        f"sqlite+aiosqlite:///{tmp_path}/unused.db",
        REMINDERS_QUEUE=queue, REMINDERS_EMAIL_QUEUE=queues[0], REMINDERS_WEBHOOK_QUEUE=queues[1],
        **variables,
    )  # fmt: skip
    env = {**os.environ, **deployed, "COLUMNS": "200"}
    return env, queues


async def run(env: dict[str, str], *args: str) -> tuple[int, str]:
    """``reminders *args`` as a process; its exit code and output."""
    process = await asyncio.create_subprocess_exec(
        str(REMINDERS),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, output.decode()


@pytest.fixture
async def sqs_admin(sqs_endpoint):
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    yield client
    await client.aclose()


async def redrive_of(client: SqsClient, queue: str) -> dict:
    attributes = await client.call(
        "get_queue_attributes",
        QueueUrl=await client.queue_url(queue),
        AttributeNames=["RedrivePolicy"],
    )
    return json.loads(attributes["Attributes"]["RedrivePolicy"])


async def test_sqs_setup_twice_then_with_a_new_receive_count(tmp_path, sqs_endpoint, sqs_admin):
    """Each run exits 0 with each queue, its DLQ and its redrive policy; the second run
    creates no queue more; a changed REMINDERS_SQS_MAX_RECEIVE_COUNT is written on the next."""
    env, queues = deployment(
        tmp_path,
        "sqs",
        REMINDERS_SQS_ENDPOINT_URL=sqs_endpoint,
        REMINDERS_SQS_REGION=REGION,
        REMINDERS_SQS_MAX_RECEIVE_COUNT="20",
    )
    try:
        for _ in range(2):
            code, output = await run(env, "setup", "--queue", "sqs")
            assert code == 0, output
            for queue in queues:
                assert queue in output and dead_letter_queue(queue) in output
        for queue in queues:  # the queue and its DLQ, once each
            listed = await sqs_admin.call("list_queues", QueueNamePrefix=queue)
            assert len(listed["QueueUrls"]) == 2
        dlq_arn = (
            await sqs_admin.call(
                "get_queue_attributes",
                QueueUrl=await sqs_admin.queue_url(dead_letter_queue(queues[0])),
                AttributeNames=["QueueArn"],
            )
        )["Attributes"]["QueueArn"]
        assert await redrive_of(sqs_admin, queues[0]) == {
            "deadLetterTargetArn": dlq_arn,
            "maxReceiveCount": 20,
        }
        code, output = await run(
            {**env, "REMINDERS_SQS_MAX_RECEIVE_COUNT": "25"}, "setup", "--queue", "sqs"
        )
        assert code == 0, output
        assert (await redrive_of(sqs_admin, queues[1]))["maxReceiveCount"] == 25
    finally:
        for queue in queues:
            for name in (queue, dead_letter_queue(queue)):
                with contextlib.suppress(SqsError):
                    await sqs_admin.call("delete_queue", QueueUrl=await sqs_admin.queue_url(name))


async def test_sqs_receive_count_not_above_max_attempts_is_refused_in_one_line(
    tmp_path, sqs_endpoint, sqs_admin
):
    """SQS would move to its DLQ a message our ledger still retries: the command refuses
    before touching SQS, with one line naming both variables."""
    env, queues = deployment(
        tmp_path,
        "sqs",
        REMINDERS_SQS_ENDPOINT_URL=sqs_endpoint,
        REMINDERS_SQS_REGION=REGION,
        REMINDERS_SQS_MAX_RECEIVE_COUNT="5",
        REMINDERS_MAX_ATTEMPTS="5",
    )
    code, output = await run(env, "setup", "--queue", "sqs")
    assert code == 1
    [line] = output.strip().splitlines()
    assert "REMINDERS_SQS_MAX_RECEIVE_COUNT" in line and "REMINDERS_MAX_ATTEMPTS" in line
    assert "Traceback" not in output
    with pytest.raises(SqsError):
        await sqs_admin.queue_url(queues[0])
    code, output = await run(
        {**env, "REMINDERS_SQS_MAX_RECEIVE_COUNT": "6"}, "setup", "--queue", "sqs"
    )
    assert code == 0, output
    for queue in queues:
        for name in (queue, dead_letter_queue(queue)):
            await sqs_admin.call("delete_queue", QueueUrl=await sqs_admin.queue_url(name))


async def test_rabbitmq_setup_twice_declares_a_topology_that_takes_messages(tmp_path, rabbit_url):
    """Both runs exit 0 naming every queue; the declared work queue then takes a
    confirmed publish (mandatory: an undeclared queue would refuse it)."""
    from app.adapters.queues.rabbitmq.publisher import RabbitPublisher
    from app.domain.messages import OutgoingMessage

    env, queues = deployment(
        tmp_path,
        "rabbitmq",
        REMINDERS_RABBITMQ_URL=rabbit_url,
        REMINDERS_RABBITMQ_MAX_DELAY_SECONDS="8",
    )
    try:
        outputs = []
        for _ in range(2):
            code, output = await run(env, "setup", "--queue", "rabbitmq")
            assert code == 0, output
            outputs.append(output)
            for queue in queues:
                for name in (queue, f"{queue}.dead", f"{queue}.dlx", f"{queue}.delay.8s"):
                    assert name in output
        assert outputs[0] == outputs[1]
        publisher = RabbitPublisher(rabbit_url, max_delay_seconds=8)
        try:
            for queue in queues:
                await publisher.publish(OutgoingMessage(queue, {"v": 1}, 0, f"{queue}:1"))
                await publisher.publish(OutgoingMessage(queue, {"v": 1}, 5, f"{queue}:2"))
        finally:
            await publisher.aclose()
    finally:
        for queue in queues:
            await delete_topology(rabbit_url, queue)
