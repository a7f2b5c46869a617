"""One aiobotocore SQS client and the queue URLs it resolved, shared by the SQS publisher,
consumer and setup. aiobotocore comes with the ``[aws]`` extra and is imported on first use."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from app.domain.errors import QueueUnavailable, ReminderRelayError

SETUP_HINT = "run `reminders setup --queue sqs`"


class SqsError(ReminderRelayError):
    """SQS refused a call (not a connection failure)."""


class SqsClient:
    """Calls SQS; connection failures raise ``QueueUnavailable``, refusals ``SqsError``."""

    def __init__(
        self,
        *,
        region: str | None,
        endpoint_url: str | None,
        queue_urls: Mapping[str, str] | None = None,
    ) -> None:
        self._options = {
            k: v for k, v in {"region_name": region, "endpoint_url": endpoint_url}.items() if v
        }
        self._urls = dict(queue_urls or {})
        self._client: Any = None
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()

    async def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """One SQS API call by its snake_case name."""
        from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

        client = await self._ensure()
        try:
            result: dict[str, Any] = await getattr(client, operation)(**params)
        except (EndpointConnectionError, OSError, TimeoutError) as error:
            raise QueueUnavailable(f"SQS unreachable: {type(error).__name__}") from error
        except ClientError as error:
            raise SqsError(f"SQS {operation} refused: {error}") from error
        except BotoCoreError as error:
            raise QueueUnavailable(f"SQS {operation} failed: {error}") from error
        return result

    async def queue_url(self, queue: str) -> str:
        """The URL of a queue name (configured, else looked up once)."""
        url = self._urls.get(queue)
        if url is None:
            try:
                url = str((await self.call("get_queue_url", QueueName=queue))["QueueUrl"])
            except SqsError as error:
                raise SqsError(f"SQS has no queue {queue!r}: {SETUP_HINT}") from error
            self._urls[queue] = url
        return url

    async def _ensure(self) -> Any:
        async with self._lock:
            if self._client is None:
                from aiobotocore.session import get_session

                self._client = await self._stack.enter_async_context(
                    get_session().create_client("sqs", **self._options)
                )
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._stack.aclose()
        self._client = None
