"""A local fake of Infrai's HTTP API, served by uvicorn on a loopback port.

It answers with the documented envelope ``{ok, data, error, metadata}`` and enforces the
documented and consistently-seen limits: bearer key, 256 KB messages, 7-day delay, 30-day
retention, idempotency keys (header and body must agree; identical retries return the
same result), existing queues and dead-letter queues. Visibility timeouts, nacks and
``max_retries`` → DLQ follow the injected clock. Tests inject faults per path (429 with
``Retry-After``, 5xx bursts, malformed bodies), switch optional routes off (batch, nack,
queue list), and mutate ``discovery`` to simulate a schema drift.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from app.adapters.queues.infrai.push_format import sign

API_KEY = "ifr_test_0123456789abcdef"
MAX_MESSAGE_BYTES = 256 * 1024
MAX_DELAY_SECONDS = 7 * 24 * 3600
DISCOVERY_FIXTURE = Path(__file__).with_name("infrai_discovery.json")


@dataclass
class Fault:
    """One scripted answer returned instead of the real handling."""

    status: int
    retry_after: str | None = None
    raw: bytes | None = None  # a malformed body; None → an error envelope
    code: str = "INJECTED"


@dataclass
class Call:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    at: datetime

    @property
    def json(self) -> Any:
        """The decoded body (None when empty)."""
        return json.loads(self.raw) if self.raw else None


@dataclass
class FakeMessage:
    """A message as the fake queue stores it."""

    message_id: str
    queue: str
    payload: dict[str, Any]
    visible_at: datetime
    published_at: datetime
    receive_count: int = 0
    nack_count: int = 0


@dataclass
class FakeQueue:
    """A queue with its documented attributes and its messages, in publish order."""

    name: str
    type: str = "standard"
    dead_letter_queue: str | None = None
    max_retries: int = 5
    visibility_timeout_default: int = 30
    message_retention_days: int = 4
    messages: list[FakeMessage] = field(default_factory=list)

    def describe(self) -> dict[str, Any]:
        """The queue as ``queue.list`` reports it."""
        return {
            "name": self.name,
            "type": self.type,
            "dead_letter_queue": self.dead_letter_queue,
            "max_retries": self.max_retries,
            "visibility_timeout_default": self.visibility_timeout_default,
            "message_retention_days": self.message_retention_days,
            "approximate_messages": len(self.messages),
        }


class InfraiFailure(Exception):
    """An error envelope to answer with."""

    def __init__(self, status: int, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.hint = status, code, message, hint


def uuid7() -> str:
    """A UUID v7 (time-ordered), as Infrai's request ids are."""
    millis = int(time.time() * 1000)
    raw = bytearray(millis.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


class FakeInfrai:
    """State and routes of the fake; ``serve_fake_infrai`` runs it on 127.0.0.1."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.base_url = ""  # set by serve_fake_infrai
        self.reset(clock)
        self.app = Starlette(routes=self._routes())

    def reset(self, clock: Callable[[], datetime]) -> None:
        """Forget every queue, message, call, fault and switch (one server, many tests)."""
        self.clock = clock
        self.api_key = API_KEY
        self.queues: dict[str, FakeQueue] = {}
        self.subscriptions: dict[str, dict[str, Any]] = {}
        self.crons: list[dict[str, Any]] = []
        self.calls: list[Call] = []
        self.faults: dict[str, list[Fault]] = {}
        self.batch_enabled = True
        self.nack_enabled = True
        self.queue_list_enabled = True
        self.credit_exhausted = False
        self.idempotency_window = timedelta(hours=24)
        self.discovery: dict[str, Any] = copy.deepcopy(json.loads(DISCOVERY_FIXTURE.read_text()))
        self._replays: dict[tuple[str, str], tuple[datetime, dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    # -- test helpers -------------------------------------------------------------------

    def add_queue(self, name: str, **attributes: Any) -> FakeQueue:
        """Create a queue directly (tests that do not exercise setup)."""
        queue = FakeQueue(name=name, **attributes)
        self.queues[name] = queue
        return queue

    def inject(self, path: str, *faults: Fault) -> None:
        """Answer the next requests to ``path`` (e.g. ``/v1/queue/publish``) with faults."""
        self.faults.setdefault(path, []).extend(faults)

    def calls_to(self, path: str) -> list[Call]:
        """The requests received on one path."""
        return [call for call in self.calls if call.path == path]

    def visible(self, queue: str) -> list[FakeMessage]:
        """Messages of a queue that a consumer could lease now."""
        now = self.clock()
        return [m for m in self.queues[queue].messages if m.visible_at <= now]

    async def push_visible(
        self,
        queue: str,
        deliver: Callable[[str, bytes, dict[str, str]], Awaitable[tuple[int, dict[str, str]]]],
        *,
        secret: str,
    ) -> int:
        """Push each visible message like a push subscription: 2xx deletes, else retry later."""
        pushed = 0
        for message in list(self.visible(queue)):
            message.receive_count += 1
            body = json.dumps(
                {
                    "message_id": message.message_id,
                    "payload": message.payload,
                    "attempt": message.receive_count,
                },
                separators=(",", ":"),
            ).encode()
            headers = {"content-type": "application/json"}
            headers["X-Infrai-Signature"] = sign(secret.encode(), body)
            status, answer_headers = await deliver(f"/push/{queue}", body, headers)
            pushed += 1
            if 200 <= status < 300:
                self.queues[queue].messages.remove(message)
            else:
                retry_after = int(answer_headers.get("retry-after", "60"))
                self._nack(self.queues[queue], message, retry_after)
        return pushed

    # -- plumbing -----------------------------------------------------------------------

    def _routes(self) -> list[Route]:
        post = ["POST"]
        return [
            Route("/v1/discovery", self._wrap(self._discovery_index, auth=False), methods=["GET"]),
            Route(
                "/v1/discovery/{capability}",
                self._wrap(self._discovery_capability, auth=False),
                methods=["GET"],
            ),
            Route("/v1/queue/publish", self._wrap(self._publish), methods=post),
            Route("/v1/queue/publish_batch", self._wrap(self._publish_batch), methods=post),
            Route("/v1/queue/create", self._wrap(self._create_queue), methods=post),
            Route("/v1/queue/list", self._wrap(self._list_queues), methods=["GET"]),
            Route("/v1/queue/consume", self._wrap(self._consume), methods=post),
            Route("/v1/queue/ack", self._wrap(self._ack), methods=post),
            Route("/v1/queue/nack", self._wrap(self._nack_route), methods=post),
            Route(
                "/v1/queue/push_subscribe/{queue}", self._wrap(self._push_subscribe), methods=post
            ),
            Route("/v1/cron/create", self._wrap(self._create_cron), methods=post),
            Route("/v1/cron/list", self._wrap(self._list_crons), methods=["GET"]),
        ]

    def _wrap(
        self, handler: Callable[[Request, Any], dict[str, Any] | Response], *, auth: bool = True
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            raw = await request.body()
            self.calls.append(
                Call(request.method, request.url.path, dict(request.headers), raw, self.clock())
            )
            scripted = self.faults.get(request.url.path)
            if scripted:
                return self._fault(scripted.pop(0))
            try:
                if auth:
                    self._authenticate(request)
                body = _json_object(raw) if request.method == "POST" else None
                result = handler(request, body)
            except InfraiFailure as failure:
                return self._error(failure)
            if isinstance(result, Response):
                return result
            return self._ok(result)

        return endpoint

    def _authenticate(self, request: Request) -> None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise InfraiFailure(
                401,
                "UNAUTHORIZED",
                "Missing or invalid project key.",
                "Send Authorization: Bearer <project key> (ifr_...).",
            )
        if self.credit_exhausted:
            raise InfraiFailure(
                402,
                "INSUFFICIENT_CREDIT",
                "The project has no credit left.",
                "Add credit in the dashboard.",
            )

    def _metadata(self) -> dict[str, Any]:
        return {
            "cost_usd": 0.000002,
            "latency_ms": 3,
            "vendor": "infrai",
            "cache_hit": False,
            "request_id": uuid7(),
        }

    def _ok(self, data: dict[str, Any]) -> Response:
        body = {"ok": True, "data": data, "error": None, "metadata": self._metadata()}
        return Response(json.dumps(body), 200, media_type="application/json")

    def _error(self, failure: InfraiFailure, headers: dict[str, str] | None = None) -> Response:
        error = {"code": failure.code, "message": failure.message}
        if failure.hint:
            error["hint"] = failure.hint
        body = {"ok": False, "data": None, "error": error, "metadata": self._metadata()}
        return Response(json.dumps(body), failure.status, headers, media_type="application/json")

    def _fault(self, fault: Fault) -> Response:
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        if fault.raw is not None:
            return Response(fault.raw, fault.status, headers, media_type="text/html")
        failure = InfraiFailure(fault.status, fault.code, "Injected failure.")
        return self._error(failure, headers)

    def _replay(self, request: Request, body: dict[str, Any]) -> tuple[str, ...] | None:
        """The idempotency cache key; header and body keys must agree when both are sent."""
        header = request.headers.get("idempotency-key")
        in_body = body.get("idempotency_key")
        if header and in_body and header != in_body:
            raise InfraiFailure(400, "IDEMPOTENCY_KEY_MISMATCH", "Header and body keys differ.")
        key = header or in_body
        return (request.url.path, str(key)) if key else None

    def _idempotent(
        self, request: Request, body: dict[str, Any], make: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        key = self._replay(request, body)
        now = self.clock()
        if key is not None and key in self._replays:
            stored_at, data = self._replays[key]
            if now - stored_at < self.idempotency_window:
                return data
        data = make()
        if key is not None:
            self._replays[key] = (now, data)
        return data

    # -- discovery ----------------------------------------------------------------------

    def _discovery_index(self, _request: Request, _body: Any) -> dict[str, Any]:
        return copy.deepcopy(self.discovery["index"])

    def _discovery_capability(self, request: Request, _body: Any) -> dict[str, Any]:
        capability = request.path_params["capability"]
        document = self.discovery["capabilities"].get(capability)
        if document is None:
            raise InfraiFailure(404, "CAPABILITY_NOT_FOUND", f"No capability {capability}.")
        return copy.deepcopy(document)

    # -- queues -------------------------------------------------------------------------

    def _queue(self, name: Any) -> FakeQueue:
        if not isinstance(name, str) or name not in self.queues:
            raise InfraiFailure(404, "QUEUE_NOT_FOUND", f"No queue named {name!r}.")
        return self.queues[name]

    def _publish(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(body.get("queue"))
        _check_message(body)
        return self._idempotent(request, body, lambda: self._store(queue, body))

    def _store(self, queue: FakeQueue, body: dict[str, Any]) -> dict[str, Any]:
        now = self.clock()
        message = FakeMessage(
            message_id=f"msg_{next(self._ids):06d}",
            queue=queue.name,
            payload=body["payload"],
            visible_at=now + timedelta(seconds=body.get("delay_seconds", 0)),
            published_at=now,
        )
        queue.messages.append(message)
        return {"message_id": message.message_id}

    def _publish_batch(self, request: Request, body: dict[str, Any]) -> Response | dict[str, Any]:
        if not self.batch_enabled:
            return PlainTextResponse("Not Found", 404)
        items = body.get("messages")
        if not isinstance(items, list) or not 1 <= len(items) <= 100:
            raise InfraiFailure(400, "INVALID_PARAMETER", "messages must hold 1-100 items.")
        bodies = [{"queue": body.get("queue"), **item} for item in items]
        for item in bodies:
            self._queue(item.get("queue"))
            _check_message(item)

        def publish_all() -> dict[str, Any]:
            ids = []
            for item in bodies:
                key = item.get("idempotency_key")
                replay = ("/v1/queue/publish", str(key)) if key else None
                if replay in self._replays:
                    ids.append(self._replays[replay][1]["message_id"])
                    continue
                data = self._store(self.queues[item["queue"]], item)
                if replay:
                    self._replays[replay] = (self.clock(), data)
                ids.append(data["message_id"])
            return {"message_ids": ids}

        return self._idempotent(request, body, publish_all)

    def _create_queue(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        def create() -> dict[str, Any]:
            name = body.get("name")
            if not isinstance(name, str) or not name:
                raise InfraiFailure(400, "INVALID_PARAMETER", "name is required.")
            if name in self.queues:
                raise InfraiFailure(409, "QUEUE_ALREADY_EXISTS", f"Queue {name} exists.")
            dlq = body.get("dead_letter_queue")
            if dlq is not None and dlq not in self.queues:
                raise InfraiFailure(
                    400,
                    "DEAD_LETTER_QUEUE_NOT_FOUND",
                    f"Create {dlq} first.",
                    "A dead_letter_queue must name an existing queue.",
                )
            retention = body.get("message_retention_days", 4)
            if not isinstance(retention, int) or not 1 <= retention <= 30:
                raise InfraiFailure(400, "INVALID_PARAMETER", "retention is 1-30 days.")
            queue = self.add_queue(
                name,
                type=body.get("type", "standard"),
                dead_letter_queue=dlq,
                max_retries=body.get("max_retries", 5),
                visibility_timeout_default=body.get("visibility_timeout_default", 30),
                message_retention_days=retention,
            )
            return queue.describe()

        return self._idempotent(request, body, create)

    def _list_queues(self, _request: Request, _body: Any) -> Response | dict[str, Any]:
        if not self.queue_list_enabled:
            return PlainTextResponse("Not Found", 404)
        return {"items": [queue.describe() for queue in self.queues.values()]}

    def _consume(self, _request: Request, body: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(body.get("queue"))
        limit = body.get("max_messages", 1)
        visibility = body.get("visibility_timeout", queue.visibility_timeout_default)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise InfraiFailure(400, "INVALID_PARAMETER", "max_messages is 1-100.")
        taken = self.visible(queue.name)[:limit]
        now = self.clock()
        for message in taken:
            message.receive_count += 1
            message.visible_at = now + timedelta(seconds=visibility)
        return {
            "messages": [
                {
                    "message_id": m.message_id,
                    "payload": m.payload,
                    "receive_count": m.receive_count,
                }
                for m in taken
            ]
        }

    def _find(self, queue: FakeQueue, message_id: Any) -> FakeMessage:
        for message in queue.messages:
            if message.message_id == message_id:
                return message
        raise InfraiFailure(404, "MESSAGE_NOT_FOUND", f"No message {message_id!r}.")

    def _ack(self, _request: Request, body: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(body.get("queue"))
        queue.messages.remove(self._find(queue, body.get("message_id")))
        return {"acknowledged": True}

    def _nack_route(self, _request: Request, body: dict[str, Any]) -> Response | dict[str, Any]:
        if not self.nack_enabled:
            return PlainTextResponse("Not Found", 404)
        queue = self._queue(body.get("queue"))
        message = self._find(queue, body.get("message_id"))
        self._nack(queue, message, body.get("delay_seconds", 0))
        return {"requeued": True}

    def _nack(self, queue: FakeQueue, message: FakeMessage, delay: float) -> None:
        message.nack_count += 1
        if message.nack_count > queue.max_retries and queue.dead_letter_queue:
            queue.messages.remove(message)
            message.queue = queue.dead_letter_queue
            message.visible_at = self.clock()
            self.queues[queue.dead_letter_queue].messages.append(message)
            return
        message.visible_at = self.clock() + timedelta(seconds=delay)

    def _push_subscribe(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        queue = self._queue(request.path_params["queue"])
        url = body.get("url") or body.get("endpoint")
        if not isinstance(url, str) or not url.startswith("https://"):
            raise InfraiFailure(400, "INVALID_URL", "Push targets must be public HTTPS URLs.")
        existing = self.subscriptions.get(queue.name)
        if existing and existing["url"] == url:
            return {k: v for k, v in existing.items() if k != "secret"}
        self.subscriptions[queue.name] = {
            "subscription_id": f"sub_{next(self._ids):06d}",
            "queue": queue.name,
            "url": url,
            "secret": body.get("secret"),
        }
        return {k: v for k, v in self.subscriptions[queue.name].items() if k != "secret"}

    # -- cron ---------------------------------------------------------------------------

    def _create_cron(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        def create() -> dict[str, Any]:
            name = body.get("name")
            schedule = body.get("schedule") or body.get("cron_expr") or body.get("run_at")
            url = body.get("url") or body.get("task_url")
            if not name or not schedule or not url:
                raise InfraiFailure(400, "INVALID_PARAMETER", "name, schedule and url required.")
            if any(job["name"] == name for job in self.crons):
                raise InfraiFailure(409, "CRON_ALREADY_EXISTS", f"Cron {name} exists.")
            payload = body.get("payload", {})
            if len(json.dumps(payload)) > 4096:
                raise InfraiFailure(400, "PAYLOAD_TOO_LARGE", "Cron payloads are at most 4 KB.")
            job = {
                "cron_id": f"cron_{next(self._ids):06d}",
                "name": name,
                "schedule": schedule,
                "url": url,
                "enabled": True,
                "payload": payload,
            }
            self.crons.append(job)
            return {k: v for k, v in job.items() if k != "payload"}

        return self._idempotent(request, body, create)

    def _list_crons(self, _request: Request, _body: Any) -> dict[str, Any]:
        return {"items": [{k: v for k, v in job.items() if k != "payload"} for job in self.crons]}


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise InfraiFailure(400, "INVALID_JSON", "The body is not JSON.") from None
    if not isinstance(body, dict):
        raise InfraiFailure(400, "INVALID_JSON", "The body must be a JSON object.")
    return body


def _check_message(body: dict[str, Any]) -> None:
    payload = body.get("payload")
    if not isinstance(payload, dict):
        raise InfraiFailure(400, "INVALID_PARAMETER", "payload must be an object.")
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_MESSAGE_BYTES:
        raise InfraiFailure(413, "PAYLOAD_TOO_LARGE", f"Message of {size} bytes over 256 KB.")
    delay = body.get("delay_seconds", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise InfraiFailure(400, "INVALID_PARAMETER", "delay_seconds must be a number.")
    if not 0 <= delay <= MAX_DELAY_SECONDS:
        raise InfraiFailure(
            400,
            "INVALID_DELAY",
            f"delay_seconds {delay} outside 0..{MAX_DELAY_SECONDS}.",
            "Delays are capped at 7 days.",
        )


@contextmanager
def serve_fake_infrai(fake: FakeInfrai) -> Iterator[FakeInfrai]:
    """Run the fake on 127.0.0.1 (a free port) in a thread; ``fake.base_url`` ends in /v1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(fake.app, lifespan="off", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake Infrai did not start")
        time.sleep(0.01)
    fake.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
