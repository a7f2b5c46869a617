"""Google Cloud Tasks publisher (``REMINDERS_QUEUE=cloudtasks``): one HTTP task per message.

Each task POSTs our JSON payload to ``{public base URL}/push/{queue}`` at ``schedule_time``
= now + delay (Cloud Tasks accepts up to 30 days, so that is the sweep horizon). The task
id is the SHA-256 of the idempotency key: Cloud Tasks refuses a second task with a name it
holds (or held within about an hour) with ALREADY_EXISTS, which counts as published, so a
repeated publish is a no-op. Each task carries Google's OIDC token when a service account is
configured, else our ``sha256=`` HMAC header signed with the first push secret (no
timestamp: the task may wait 30 days). The queue id is the channel's queue name.

With ``CLOUD_TASKS_EMULATOR_HOST`` set the client talks plain gRPC to that host:port
without credentials; ``google-cloud-tasks`` itself ignores emulator variables.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from google.api_core import exceptions as google_errors
from google.cloud import tasks_v2
from google.protobuf import timestamp_pb2

from app.adapters.push_formats.signatures import sign
from app.domain.clock import utc_now
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.queueing import check_publishable

MAX_DELAY_SECONDS = 30 * 24 * 3600.0
PUBLISH_TIMEOUT_SECONDS = 10.0
BATCH_CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class CloudTasksTarget:
    """Where tasks live and how each one calls us back."""

    project: str
    location: str
    push_base_url: str  # REMINDERS_PUBLIC_BASE_URL
    signing_secret: bytes | None = None  # HMAC fallback when no OIDC service account
    signature_header: str = "X-Infrai-Signature"
    oidc_service_account: str | None = None
    oidc_audience: str | None = None  # default: the push URL itself

    def queue_path(self, queue: str) -> str:
        """The queue's resource name."""
        return f"projects/{self.project}/locations/{self.location}/queues/{queue}"


def task_id(idempotency_key: str) -> str:
    """The task id for a key: a hash, so equal keys collide and names spread evenly."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


class CloudTasksPublisher:
    """Creates one Cloud Tasks HTTP task per message."""

    name = "cloudtasks"

    def __init__(
        self,
        target: CloudTasksTarget,
        *,
        client_factory: Callable[[], Any],
        clock: Callable[[], datetime] = utc_now,
        max_delay_seconds: float = MAX_DELAY_SECONDS,
    ) -> None:
        self.target = target
        self.max_delay_seconds = max_delay_seconds
        self._client_factory = client_factory
        self._client: Any = None  # made on first use, inside the running loop
        self._clock = clock

    async def publish(self, message: OutgoingMessage) -> str:
        """Create the task; an existing task of the same name counts as published."""
        check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        task = self._task(message)
        try:
            await self._tasks().create_task(
                parent=self.target.queue_path(message.queue),
                task=task,
                timeout=PUBLISH_TIMEOUT_SECONDS,
            )
        except google_errors.AlreadyExists:
            pass  # published before: same key, same task
        except google_errors.GoogleAPIError as error:
            raise PublishError(f"Cloud Tasks refused the task: {error}") from error
        return task.name.rsplit("/", 1)[-1]

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Check every message first, then create the tasks, at most ``BATCH_CONCURRENCY``
        at a time (Cloud Tasks has no batch create); ids in the given order."""
        for message in messages:
            check_publishable(message, max_delay_seconds=self.max_delay_seconds)
        slots = asyncio.Semaphore(BATCH_CONCURRENCY)

        async def create(message: OutgoingMessage) -> str:
            async with slots:
                return await self.publish(message)

        return list(await asyncio.gather(*(create(m) for m in messages)))

    async def aclose(self) -> None:
        """Close the gRPC channel."""
        if self._client is not None:
            await self._client.transport.close()
            self._client = None

    def _tasks(self) -> Any:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def _task(self, message: OutgoingMessage) -> tasks_v2.Task:
        body = orjson.dumps(dict(message.payload))
        url = f"{self.target.push_base_url.rstrip('/')}/push/{message.queue}"
        request = tasks_v2.HttpRequest(
            url=url,
            http_method=tasks_v2.HttpMethod.POST,
            headers=self._headers(body),
            body=body,
        )
        if self.target.oidc_service_account:
            request.oidc_token = tasks_v2.OidcToken(
                service_account_email=self.target.oidc_service_account,
                audience=self.target.oidc_audience or url,
            )
        due = self._clock() + timedelta(seconds=message.delay_seconds)
        schedule_time = timestamp_pb2.Timestamp()
        schedule_time.FromDatetime(due)
        return tasks_v2.Task(
            name=f"{self.target.queue_path(message.queue)}/tasks/{task_id(message.idempotency_key)}",
            http_request=request,
            schedule_time=schedule_time,
        )

    def _headers(self, body: bytes) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if not self.target.oidc_service_account and self.target.signing_secret:
            headers[self.target.signature_header] = sign(self.target.signing_secret, body)
        return headers


def cloudtasks_client_factory(emulator_host: str | None) -> Callable[[], Any]:
    """Builds the async client: plain gRPC to the emulator, else Google's default credentials."""

    def build() -> Any:
        from google.cloud.tasks_v2.services.cloud_tasks.transports import (
            CloudTasksGrpcAsyncIOTransport,
        )

        if emulator_host:
            import grpc

            channel = grpc.aio.insecure_channel(emulator_host)
            transport = CloudTasksGrpcAsyncIOTransport(channel=channel)
            return tasks_v2.CloudTasksAsyncClient(transport=transport)
        return tasks_v2.CloudTasksAsyncClient()

    return build
