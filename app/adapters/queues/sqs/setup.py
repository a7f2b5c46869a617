"""``reminders setup --queue sqs``: each channel queue and its DLQ, with a redrive policy.

Idempotent: ``CreateQueue`` with the same attributes returns the existing queue; the
redrive policy is (re)written with ``SetQueueAttributes`` each time, so a changed
``REMINDERS_SQS_MAX_RECEIVE_COUNT`` takes effect on the next deploy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .client import SqsClient
from .publisher import is_fifo


@dataclass(frozen=True, slots=True)
class Declared:
    """One created or updated resource, for the setup table."""

    kind: str
    name: str
    status: str


def dead_letter_queue(queue: str) -> str:
    """The DLQ of a queue (a FIFO queue's DLQ is FIFO too)."""
    return f"{queue.removesuffix('.fifo')}-dlq" + (".fifo" if is_fifo(queue) else "")


async def create_queues(
    client: SqsClient, queues: list[str], *, max_receive_count: int
) -> list[Declared]:
    """Create each queue's DLQ, the queue, and its redrive policy."""
    done: list[Declared] = []
    for queue in queues:
        dlq = dead_letter_queue(queue)
        dlq_url = await _create(client, dlq)
        arn = (
            await client.call("get_queue_attributes", QueueUrl=dlq_url, AttributeNames=["QueueArn"])
        )["Attributes"]["QueueArn"]
        url = await _create(client, queue)
        policy = {"deadLetterTargetArn": arn, "maxReceiveCount": str(max_receive_count)}
        await client.call(
            "set_queue_attributes", QueueUrl=url, Attributes={"RedrivePolicy": json.dumps(policy)}
        )
        done += [
            Declared("dlq", dlq, "created"),
            Declared("queue", queue, "created"),
            Declared("redrive policy", f"{queue} → {dlq} after {max_receive_count}", "updated"),
        ]
    return done


async def _create(client: SqsClient, name: str) -> str:
    attributes = {"FifoQueue": "true"} if is_fifo(name) else {}
    result = await client.call("create_queue", QueueName=name, Attributes=attributes)
    return str(result["QueueUrl"])
