"""Google Pub/Sub push requests, wrapped or unwrapped.

Wrapped (the default): ``{"message": {"data": base64, "attributes", "messageId"},
"subscription", "deliveryAttempt"?}``; the emulator also sends ``message_id`` and never
``deliveryAttempt``. Unwrapped (payload unwrapping): the body is the message data itself,
metadata in ``x-goog-pubsub-*`` headers when "write metadata" is on (a message id is needed,
so it must be). Authentication: Google's OIDC token when an audience and service account are
configured, else a ``token`` query parameter on the push endpoint equal to one of
``REMINDERS_PUSH_SECRETS`` (the emulator sends no OIDC token).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from app.adapters.push_formats.google_oidc import GoogleOidcVerifier
from app.adapters.push_formats.signatures import check_token
from app.domain.errors import MalformedDelivery
from app.domain.messages import Delivery, PushRequest

MESSAGE_ID_HEADER = "x-goog-pubsub-message-id"
DELIVERY_ATTEMPT_HEADER = "x-goog-pubsub-delivery-attempt"


class PubSubPushFormat:
    """Authenticates Pub/Sub pushes (OIDC or token) and unwraps their message."""

    name = "pubsub"

    def __init__(self, *, oidc: GoogleOidcVerifier | None, tokens: Sequence[bytes]) -> None:
        if oidc is None and not tokens:
            raise ValueError("Pub/Sub pushes need OIDC settings or a push secret")
        self._oidc = oidc
        self._tokens = tuple(tokens)

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the OIDC token (or else the query token) matches;
        ``AuthenticationUnavailable`` (503) when Google's certificates cannot be fetched."""
        if self._oidc is not None:
            await self._oidc.verify(request.headers, now=now)
            return
        check_token(self._tokens, request.query.get("token"))

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """The message's data as our payload; wrapped or unwrapped by the body's shape."""
        body = _json(request.body)
        if isinstance(body, dict) and isinstance(body.get("message"), dict):
            return _wrapped(queue, body)
        return _unwrapped(queue, body, request.headers)


def _wrapped(queue: str, envelope: dict[str, Any]) -> Delivery:
    message = envelope["message"]
    message_id = message.get("messageId") or message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise MalformedDelivery("message.messageId is missing")
    data = message.get("data")
    if not isinstance(data, str):
        raise MalformedDelivery("message.data is missing")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedDelivery("message.data is not base64") from None
    attempt = envelope.get("deliveryAttempt")
    return Delivery(
        queue=queue,
        message_id=message_id[:255],
        payload=_json(raw),
        attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None,
    )


def _unwrapped(queue: str, payload: Any, headers: Mapping[str, str]) -> Delivery:
    message_id = (headers.get(MESSAGE_ID_HEADER) or "").strip()
    if not message_id:
        raise MalformedDelivery(
            "neither a wrapped message nor an x-goog-pubsub-message-id header "
            "(enable write metadata on an unwrapped subscription)"
        )
    attempt = (headers.get(DELIVERY_ATTEMPT_HEADER) or "").strip()
    return Delivery(
        queue=queue,
        message_id=message_id[:255],
        payload=payload,
        attempt=int(attempt) if attempt.isdigit() else None,
    )


def _json(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise MalformedDelivery("message data is not JSON") from None
