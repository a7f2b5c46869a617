"""AWS SNS publisher: ``Publish`` / ``PublishBatch`` to the topic configured per queue.

SNS has no delayed delivery, so ``max_delay_seconds`` is 0: the sweep publishes a reminder
when it is due (run it as often as the lateness you accept). Standard topics do not
deduplicate (FIFO topics do, but cannot push to HTTP/S endpoints): a republish with the
same key is a second message, which the ledger answers ``duplicate``. The key travels as
the ``idempotency_key`` message attribute for operators.

botocore (through aiobotocore) comes with the ``[aws]`` extra; credentials and region come
from the usual AWS chain (environment, profile, instance role) unless given here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from app.domain.errors import ConfigError, PublishError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

BATCH_LIMIT = 10  # SNS PublishBatch takes at most ten entries


class SnsPublisher:
    """Publishes each message to the SNS topic of its queue."""

    name = "sns"
    max_delay_seconds = 0.0

    def __init__(
        self,
        topics: Mapping[str, str],
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._topics = dict(topics)
        self._options = {
            "region_name": region,
            "endpoint_url": endpoint_url,
            **(client_options or {}),
        }
        self._client: Any = None
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; the SNS MessageId."""
        [message_id] = await self.publish_batch([message])
        return message_id

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message, then publish in PublishBatch calls per topic; ids in order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
            self._topic(message.queue)
        ids: list[str] = []
        for start in range(0, len(messages), BATCH_LIMIT):
            ids.extend(await self._publish_chunk(messages[start : start + BATCH_LIMIT]))
        return ids

    async def _publish_chunk(self, chunk: Sequence[OutgoingMessage]) -> list[str]:
        # One PublishBatch per topic in the chunk (entries of one call share a topic).
        ids: dict[int, str] = {}
        for topic, positions in _by_topic(chunk, self._topic).items():
            entries = [_entry(str(p), chunk[p]) for p in positions]
            result = await self._call(
                "publish_batch", TopicArn=topic, PublishBatchRequestEntries=entries
            )
            failed = result.get("Failed") or []
            if failed:
                raise PublishError(f"SNS refused {len(failed)} message(s): {failed[0]!r:.200}")
            for success in result.get("Successful", []):
                ids[int(success["Id"])] = success["MessageId"]
        return [ids[p] for p in range(len(chunk))]

    def _topic(self, queue: str) -> str:
        topic = self._topics.get(queue)
        if topic is None:
            raise PublishError(f"no SNS topic configured for queue {queue!r}")
        return topic

    async def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = await self._ensure_client()
        try:
            result: dict[str, Any] = await getattr(client, operation)(**params)
        except (BotoCoreError, ClientError) as error:
            raise PublishError(f"SNS {operation} failed: {error}") from error
        return result

    async def _ensure_client(self) -> Any:
        async with self._lock:
            if self._client is None:
                try:
                    from aiobotocore.session import get_session
                except ImportError as error:  # the default install has no AWS SDK
                    raise ConfigError(
                        "REMINDERS_QUEUE=sns needs: pip install 'reminder-relay[aws]'"
                    ) from error
                options = {k: v for k, v in self._options.items() if v is not None}
                self._client = await self._stack.enter_async_context(
                    get_session().create_client("sns", **options)
                )
        return self._client

    async def aclose(self) -> None:
        """Close the SNS client's connections."""
        await self._stack.aclose()
        self._client = None


def _by_topic(chunk: Sequence[OutgoingMessage], topic_of: Any) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for position, message in enumerate(chunk):
        grouped.setdefault(topic_of(message.queue), []).append(position)
    return grouped


def _entry(entry_id: str, message: OutgoingMessage) -> dict[str, Any]:
    return {
        "Id": entry_id,
        "Message": json.dumps(message.payload, separators=(",", ":")),
        "MessageAttributes": {
            "idempotency_key": {"DataType": "String", "StringValue": message.idempotency_key}
        },
    }
