"""``POST /push/{queue}``: the queue's push target. The hot path: no ORM, no response model."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from app.domain.clock import utc_now
from app.domain.errors import (
    AuthenticationUnavailable,
    LedgerUnavailable,
    MalformedDelivery,
    NotFound,
    PayloadTooLarge,
    Unauthenticated,
)
from app.domain.messages import Delivery, PushRequest
from app.domain.states import DeadLetterReason
from app.observability.metrics import record_delivery, record_push_refused
from app.services.receive import Answer, database_unavailable, quarantine, receive_delivery

from .deps import Container, failed_check, get_container, read_capped
from .errors import error_response
from .request_log import LOGGED

router = APIRouter()
log = logging.getLogger("reminders.push")


def answer_response(answer: Answer) -> Response:
    """200 for acks, 503 + Retry-After for nacks; the body always names the outcome."""
    if answer.outcome.acknowledges:
        return Response(orjson.dumps(answer.to_json()), 200, media_type="application/json")
    retry_after = str(int(answer.retry_after or 1))
    return Response(
        orjson.dumps(answer.to_json()),
        503,
        headers={"Retry-After": retry_after},
        media_type="application/json",
    )


async def push(request: Request) -> Response:
    """Authenticate, then hand the delivery to the receiver and answer ack or nack."""
    queue: str = request.path_params["queue"]
    request.scope["route"] = _push_route  # what FastAPI's own routes leave for the access log
    container: Container = get_container(request)
    push_format = container.push_formats.get(queue)
    if push_format is None:  # before anything: an unknown name leaves no log line or metric
        return error_response(NotFound("no such queue"))
    try:
        body = await read_capped(request, container.settings.push_max_body_bytes)
        pushed = PushRequest(body, request.headers, _query(request))
        # Signatures and tokens are stamped by the sender's wall clock, so they are checked
        # against the one wall clock, not the container's (which tests move by hand).
        await push_format.authenticate(pushed, now=utc_now().timestamp())
    except PayloadTooLarge as error:
        log.warning("push refused on queue %s: %s", queue[:64], error)
        record_push_refused("too_large")
        return error_response(error)
    except Unauthenticated as error:  # only failures reach the throttle: no cost when valid
        log.warning("push refused on queue %s: %s", queue[:64], error)
        record_push_refused("unauthenticated")
        return error_response(failed_check(request, container, "push", str(error)))
    except AuthenticationUnavailable as error:  # our side failed: the queue must retry (5xx)
        log.error("push on queue %s not verifiable now: %s", queue[:64], error)
        record_push_refused("keys_unavailable")
        return error_response(error)
    handle_control = getattr(push_format, "handle_control", None)
    if handle_control is not None:
        control = await _control_answer(handle_control, pushed, queue)
        if control is not None:
            return control
    started = time.perf_counter()
    try:
        delivery = push_format.parse(queue, pushed)
    except MalformedDelivery as error:
        delivery = Delivery(queue=queue, message_id=_fallback_id(body), payload=None)
        try:
            answer = await quarantine(
                container.receiver, delivery, reason=DeadLetterReason.MALFORMED, error=str(error)
            )
        except LedgerUnavailable as unavailable:
            answer = database_unavailable(delivery, unavailable)
    else:
        answer = await receive_delivery(container.receiver, delivery)
    response = answer_response(answer)
    record_delivery(
        delivery,
        answer,
        time.perf_counter() - started,
        method="POST",
        route=PUSH_PATH,
        status=response.status_code,
    )
    request.scope[LOGGED] = True  # the delivery line is this request's access line
    return response


# A plain Starlette route: the handler reads the raw request itself, so FastAPI's
# per-request dependency and parameter solving (~8% of a duplicate delivery, measured in
# bench/push.py) buys nothing here. Errors still go through app/api/errors.py.
PUSH_PREFIX = "/push/"
PUSH_PATH = PUSH_PREFIX + "{queue}"
router.add_route(PUSH_PATH, push, methods=["POST"], include_in_schema=False)
_push_route = router.routes[-1]


async def _control_answer(
    handle_control: Callable[[PushRequest], Awaitable[str | None]],
    pushed: PushRequest,
    queue: str,
) -> Response | None:
    # A queue's handshake (SNS subscription confirmation): acted on, answered 200, never a
    # delivery. A confirmation we refuse or cannot complete answers like authentication.
    try:
        detail = await handle_control(pushed)
    except (Unauthenticated, AuthenticationUnavailable) as error:
        log.warning("control message on queue %s refused: %s", queue[:64], error)
        return error_response(error)
    if detail is None:
        return None
    return Response(orjson.dumps({"outcome": "control", "ack": True, "detail": detail}), 200)


def _query(request: Request) -> Mapping[str, str]:
    # Most queues sign and send no query string: parsing an empty one (Starlette builds a
    # QueryParams through urllib each time) was ~2% of a duplicate delivery.
    return request.query_params if request.scope.get("query_string") else _NO_QUERY


_NO_QUERY: Mapping[str, str] = MappingProxyType({})


def _fallback_id(body: bytes) -> str:
    # A malformed envelope has no usable message id; the body hash keeps redeliveries of the
    # same bytes to one dead-letter row.
    return "sha256:" + hashlib.sha256(body).hexdigest()


_PUSH_DESCRIPTION = """\
The queue's push target (`{queue}`: the queue's name). Called by the queue, not by
applications: the body is authenticated as raw bytes before anything is parsed, per the
format the queue's kind uses (REMINDERS_QUEUE, or a channel's own queue kind):

- **embedded, infrai** — body `{"message_id", "payload": {"v": 1, "reminder_id", "channel",
  "schedule_version"}, "attempt"?}`; header `X-Infrai-Signature: sha256=<hex>` = HMAC-SHA256
  with one of REMINDERS_PUSH_SECRETS over the body, or over `<timestamp>.<body>` when
  `X-Infrai-Timestamp` (Unix seconds, within the tolerance) is sent.
- **cloudtasks** — body: the payload itself; `X-CloudTasks-TaskName` (message id) and
  `X-CloudTasks-TaskRetryCount`; authenticated by Google's OIDC token
  (`Authorization: Bearer`, audience and service account configured) or else the same
  `sha256=` HMAC header the publisher set on the task.
- **pubsub, wrapped** (default) — `{"message": {"data": base64(payload), "messageId",
  "attributes"}, "subscription", "deliveryAttempt"?}`; **pubsub, unwrapped** — body: the
  payload, `x-goog-pubsub-message-id` and `x-goog-pubsub-delivery-attempt` headers (write
  metadata on). Either: Google's OIDC token, or a `token` query parameter equal to a push
  secret.
- **sns** — the SNS JSON envelope (`Type`, `MessageId`, `Message` = the payload as JSON
  text, `TopicArn`, `Signature`, `SigningCertURL`, …) sent as text/plain, verified with
  AWS's signature (SignatureVersion 1 or 2) for a configured topic; a
  SubscriptionConfirmation is confirmed and answered `{"outcome": "control"}`.
- **qstash** — body: the payload; `Upstash-Signature` JWT (HS256, current or next signing
  key, `sub` = our push URL, `body` = base64url SHA-256 of the body), `Upstash-Message-Id`,
  `Upstash-Retried`.

200 acknowledges (`sent`, `duplicate`, `suppressed`, `cancelled`, `stale`, `expired`,
`terminal`, `dead_lettered`, `rejected`); 503 with Retry-After asks the queue to retry
(`retry`, `busy`, or keys to verify the push could not be fetched).
"""


class PushAnswer(BaseModel):
    """The receiver's answer: the outcome and whether it acknowledges the message."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "outcome": "sent",
                    "ack": True,
                    "reminder_id": "r1",
                    "channel": "email",
                    "attempt": 1,
                }
            ]
        }
    )

    outcome: str = Field(description="sent, duplicate, …, retry, busy, control")
    ack: bool
    reminder_id: str | None = None
    channel: str | None = None
    attempt: int | None = None
    retry_after: float | None = None
    detail: str | None = Field(default=None, description="an error class or short reason")


def push_operation() -> dict[str, Any]:
    """The OpenAPI operation of the push route (a plain route FastAPI does not document)."""
    answer = {"schema": {"$ref": "#/components/schemas/PushAnswer"}}
    return {
        "tags": ["push"],
        "summary": "Receive Push",
        "operationId": "receive_push",
        "description": _PUSH_DESCRIPTION,
        "parameters": [
            {"name": "queue", "in": "path", "required": True, "schema": {"type": "string"}}
        ],
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {}},
                "text/plain": {"schema": {"type": "string"}},
            },
        },
        "responses": {
            "200": {"description": "acknowledged", "content": {"application/json": answer}},
            "503": {
                "description": "retry after Retry-After seconds",
                "content": {"application/json": {"schema": {}}},
            },
        },
    }
