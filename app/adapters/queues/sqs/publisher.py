"""Amazon SQS publisher: ``SendMessageBatch`` (10 per call) with ``DelaySeconds``.

SQS delays a message at most 15 minutes, so the sweep horizon of an SQS queue is 900 s and
the sweep must run at least every 15 minutes minus its time budget (every few minutes is
usual). A FIFO queue (a name ending in ``.fifo``) takes no per-message delay: its max delay
is 0 (publish when due), its ``MessageDeduplicationId`` is the idempotency key (SQS drops a
repeat within 5 minutes) and its ``MessageGroupId`` the customer (the sweep and the catch-up
know it; a redriven or moved message without one is grouped by its reminder), so one
customer's reminders are delivered in order while customers do not wait on each other. A
standard queue does not deduplicate: a repeat is a second message, which the ledger answers
``duplicate``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

from app.domain.errors import PublishError, ReminderRelayError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

from .client import SqsClient

BATCH_LIMIT = 10
MAX_DELAY_SECONDS = 900.0  # SQS's own ceiling
_DEDUP_MAX = 128


def is_fifo(queue: str) -> bool:
    """SQS FIFO queue names end in ``.fifo``."""
    return queue.endswith(".fifo")


class SqsPublisher:
    """Publishes each message to the SQS queue named by its channel queue."""

    name = "sqs"

    def __init__(self, client: SqsClient, *, fifo: bool = False) -> None:
        self.client = client
        self.max_delay_seconds = 0.0 if fifo else MAX_DELAY_SECONDS

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; its SQS MessageId."""
        [message_id] = await self.publish_batch([message])
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message, then SendMessageBatch per queue, ten at a time; ids in order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        ids: dict[int, str] = {}
        for queue, positions in _by_queue(messages).items():
            for start in range(0, len(positions), BATCH_LIMIT):
                chunk = positions[start : start + BATCH_LIMIT]
                ids.update(await self._send(queue, [(p, messages[p]) for p in chunk]))
        return [ids[p] for p in range(len(messages))]

    async def _send(self, queue: str, chunk: list[tuple[int, OutgoingMessage]]) -> dict[int, str]:
        try:
            url = await self.client.queue_url(queue)
            result = await self.client.call(
                "send_message_batch",
                QueueUrl=url,
                Entries=[_entry(str(p), m, fifo=is_fifo(queue)) for p, m in chunk],
            )
        except ReminderRelayError as error:
            raise PublishError(str(error)) from error
        failed = result.get("Failed") or []
        if failed:
            raise PublishError(f"SQS refused {len(failed)} message(s): {failed[0]!r:.200}")
        return {int(ok["Id"]): ok["MessageId"] for ok in result.get("Successful", [])}

    async def aclose(self) -> None:
        """Close the SQS client."""
        await self.client.aclose()


def _by_queue(messages: Sequence[OutgoingMessage]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for position, message in enumerate(messages):
        grouped.setdefault(message.queue, []).append(position)
    return grouped


def _entry(entry_id: str, message: OutgoingMessage, *, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Id": entry_id,
        "MessageBody": json.dumps(message.payload, separators=(",", ":")),
        "MessageAttributes": {
            "idempotency_key": {"DataType": "String", "StringValue": message.idempotency_key}
        },
    }
    if fifo:
        entry["MessageDeduplicationId"] = dedup_id(message.idempotency_key)
        entry["MessageGroupId"] = message_group(message)
    else:
        entry["DelaySeconds"] = min(math.ceil(message.delay_seconds), int(MAX_DELAY_SECONDS))
    return entry


def message_group(message: OutgoingMessage) -> str:
    """A FIFO queue's ``MessageGroupId``: the customer, else the reminder (as ``dedup_id``
    makes it: SQS takes 128 printable ASCII characters)."""
    return dedup_id(message.group or str(message.payload.get("reminder_id", "reminders")))


def dedup_id(key: str) -> str:
    """The key itself when SQS accepts it, else its SHA-256 (same key → same id); the same
    rule makes a ``MessageGroupId``."""
    if len(key) <= _DEDUP_MAX and key.isascii() and key.isprintable():
        return key
    return hashlib.sha256(key.encode()).hexdigest()
