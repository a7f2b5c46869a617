"""Amazon SQS consumer for the pull worker.

* ``ReceiveMessage`` with long polling (``WaitTimeSeconds`` ≤ 20) and the visibility
  timeout as the lease; the worker extends it (``ChangeMessageVisibility``) every third of
  its length while a send runs.
* ``ApproximateReceiveCount`` is the attempt.
* ack = ``DeleteMessage``, after the finalize committed.
* nack = ``ChangeMessageVisibility`` to our backoff. SQS refuses a visibility that ends
  more than 12 hours after the receive, so a longer backoff gets what is left of them; each
  redelivery counts toward the redrive policy's ``maxReceiveCount``, after which SQS moves
  the message to the DLQ and the sweep's catch-up republishes the send.
* give back = visibility 0; abandon = nothing (the visibility timeout redelivers).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.domain.messages import Delivery, PulledMessage

from .client import SqsClient

MAX_VISIBILITY_SECONDS = 43200  # 12 hours from the receive: SQS's ceiling
# A visibility asked for ends this far inside the ceiling (the call itself takes time).
CEILING_MARGIN_SECONDS = 60
MAX_WAIT_SECONDS = 20
BATCH_LIMIT = 10


class SqsConsumer:
    """Implements ``app.domain.ports.PullConsumer`` over SQS."""

    name = "sqs"
    long_polls = True
    leases = True

    def __init__(self, client: SqsClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self._clock = clock
        # When each receipt we hold was received: the 12 hours count from then.
        self._received_at: dict[str, float] = {}

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
        now = self._clock()
        pulled = []
        for raw in result.get("Messages", []):
            self._received_at[raw["ReceiptHandle"]] = now
            pulled.append(PulledMessage(_delivery(queue, raw), raw["ReceiptHandle"]))
        return pulled

    async def ack(self, message: PulledMessage) -> None:
        """Delete a handled message."""
        await self.client.call(
            "delete_message",
            QueueUrl=await self.client.queue_url(message.delivery.queue),
            ReceiptHandle=message.receipt,
        )
        self._received_at.pop(message.receipt, None)

    async def nack(self, message: PulledMessage, *, delay: float) -> bool:
        """Come back after ``delay`` s (at most what is left of the 12 hours)."""
        await self._visibility(message, int(min(max(delay, 0), self._visibility_left(message))))
        self._received_at.pop(message.receipt, None)
        return True

    async def extend_lease(self, message: PulledMessage, *, seconds: int) -> None:
        """Keep a message invisible ``seconds`` more while its send runs."""
        await self._visibility(message, min(seconds, self._visibility_left(message)))

    async def abandon(self, message: PulledMessage) -> None:
        """Left to the visibility timeout (and the redrive policy)."""
        self._received_at.pop(message.receipt, None)

    async def give_back(self, messages: Sequence[PulledMessage]) -> None:
        """Visible again at once."""
        for message in messages:
            await self._visibility(message, 0)
            self._received_at.pop(message.receipt, None)

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

    def _visibility_left(self, message: PulledMessage) -> int:
        """Seconds of visibility SQS still accepts for this receipt."""
        now = self._clock()
        held = now - self._received_at.get(message.receipt, now)
        return max(0, int(MAX_VISIBILITY_SECONDS - held - CEILING_MARGIN_SECONDS))

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
