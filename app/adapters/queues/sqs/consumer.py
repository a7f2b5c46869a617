"""Amazon SQS consumer for the pull worker.

* ``ReceiveMessage`` with long polling (``WaitTimeSeconds`` ≤ 20) and the visibility
  timeout as the lease; the worker extends it (``ChangeMessageVisibility``) every third of
  its length while a send runs.
* ``ApproximateReceiveCount`` is the attempt.
* ack = ``DeleteMessage``, after the finalize committed.
* nack = ``ChangeMessageVisibility`` to our backoff (SQS caps it at 12 hours); each
  redelivery counts toward the redrive policy's ``maxReceiveCount``, after which SQS moves
  the message to the DLQ and the sweep's catch-up republishes the send.
* give back = visibility 0; abandon = nothing (the visibility timeout redelivers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.domain.messages import Delivery, PulledMessage

from .client import SqsClient

MAX_VISIBILITY_SECONDS = 43200  # 12 hours: SQS's ceiling
MAX_WAIT_SECONDS = 20
BATCH_LIMIT = 10


class SqsConsumer:
    """Implements ``app.domain.ports.PullConsumer`` over SQS."""

    name = "sqs"
    long_polls = True
    leases = True

    def __init__(self, client: SqsClient) -> None:
        self.client = client

    async def receive(
        self, queue: str, *, max_messages: int, lease_seconds: int, wait_seconds: float
    ) -> list[PulledMessage]:
        """Lease up to ten messages for ``lease_seconds``, long polling ``wait_seconds``."""
        result = await self.client.call(
            "receive_message",
            QueueUrl=await self.client.queue_url(queue),
            MaxNumberOfMessages=max(1, min(max_messages, BATCH_LIMIT)),
            WaitTimeSeconds=int(min(wait_seconds, MAX_WAIT_SECONDS)),
            VisibilityTimeout=min(lease_seconds, MAX_VISIBILITY_SECONDS),
            AttributeNames=["ApproximateReceiveCount"],
        )
        return [
            PulledMessage(_delivery(queue, raw), raw["ReceiptHandle"])
            for raw in result.get("Messages", [])
        ]

    async def ack(self, message: PulledMessage) -> None:
        """Delete a handled message."""
        await self.client.call(
            "delete_message",
            QueueUrl=await self.client.queue_url(message.delivery.queue),
            ReceiptHandle=message.receipt,
        )

    async def nack(self, message: PulledMessage, *, delay: float) -> bool:
        """Come back after ``delay`` s (at most 12 hours)."""
        await self._visibility(message, int(min(max(delay, 0), MAX_VISIBILITY_SECONDS)))
        return True

    async def extend_lease(self, message: PulledMessage, *, seconds: int) -> None:
        """Keep a message invisible ``seconds`` more while its send runs."""
        await self._visibility(message, min(seconds, MAX_VISIBILITY_SECONDS))

    async def abandon(self, message: PulledMessage) -> None:
        """Left to the visibility timeout (and the redrive policy)."""

    async def give_back(self, messages: Sequence[PulledMessage]) -> None:
        """Visible again at once."""
        for message in messages:
            await self._visibility(message, 0)

    async def backlog(self, queue: str) -> int | None:
        """``ApproximateNumberOfMessages`` (visible, waiting)."""
        result = await self.client.call(
            "get_queue_attributes",
            QueueUrl=await self.client.queue_url(queue),
            AttributeNames=["ApproximateNumberOfMessages"],
        )
        return int(result.get("Attributes", {}).get("ApproximateNumberOfMessages", 0))

    async def close(self) -> None:
        """Close the client; leased messages return when their visibility ends."""
        await self.client.aclose()

    async def _visibility(self, message: PulledMessage, seconds: int) -> None:
        await self.client.call(
            "change_message_visibility",
            QueueUrl=await self.client.queue_url(message.delivery.queue),
            ReceiptHandle=message.receipt,
            VisibilityTimeout=seconds,
        )


def _delivery(queue: str, raw: dict[str, Any]) -> Delivery:
    body = raw.get("Body", "")
    payload: Any
    try:
        payload = json.loads(body)
    except ValueError:
        payload = body  # quarantined by the receiver
    count = raw.get("Attributes", {}).get("ApproximateReceiveCount")
    return Delivery(
        queue=queue,
        message_id=str(raw.get("MessageId", ""))[:255],
        payload=payload,
        attempt=int(count) if count and str(count).isdigit() else None,
    )
