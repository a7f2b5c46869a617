"""Infrai push requests: ``{message_id, payload, ...}`` signed with HMAC-SHA256.

Infrai leaves the signature scheme undocumented (docs/queues/infrai.md), so all three
forms seen in client code are accepted:

* ``X-Infrai-Signature: <hex HMAC-SHA256(secret, raw body)>``
* the same with a ``sha256=`` prefix
* with ``X-Infrai-Timestamp: <unix seconds>``, the HMAC covers ``<timestamp>.<raw body>``
  and the timestamp must be within the tolerance (replay protection).

A push without a timestamp can be replayed for as long as its secret is valid; the ledger
makes a replay harmless (``duplicate``), and ``require_timestamp``
(``REMINDERS_PUSH_REQUIRE_TIMESTAMP``) refuses such pushes outright.

Any configured secret is accepted (rotation: current first, next or previous after).
Header names are configurable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from app.adapters.push_formats.signatures import check_hmac, sign
from app.domain.errors import MalformedDelivery, Unauthenticated
from app.domain.messages import Delivery, PushRequest

__all__ = ["InfraiPushFormat", "sign"]

_ATTEMPT_FIELDS = ("attempt", "delivery_attempt", "attempts")


class InfraiPushFormat:
    """Checks Infrai push signatures and reads its envelope."""

    name = "infrai"

    def __init__(
        self,
        secrets: Sequence[bytes],
        *,
        signature_header: str = "X-Infrai-Signature",
        timestamp_header: str = "X-Infrai-Timestamp",
        tolerance_seconds: int = 300,
        require_timestamp: bool = False,
    ) -> None:
        if not secrets:
            raise ValueError("at least one push secret is required")
        self._secrets = tuple(secrets)
        self._signature_header = signature_header.lower()
        self._timestamp_header = timestamp_header.lower()
        self._tolerance = tolerance_seconds
        self._require_timestamp = require_timestamp

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the body carries a valid signature."""
        self.check_signature(request.body, request.headers, now=now)

    def check_signature(self, body: bytes, headers: Mapping[str, str], *, now: float) -> None:
        """The signature check itself (synchronous: no keys to fetch)."""
        provided = headers.get(self._signature_header)
        if not provided:
            raise Unauthenticated("missing signature header")
        signed = self._signed_bytes(body, headers.get(self._timestamp_header), now)
        check_hmac(self._secrets, signed, provided)

    def _signed_bytes(self, body: bytes, timestamp: str | None, now: float) -> bytes:
        if timestamp is None and self._require_timestamp:
            raise Unauthenticated("a signed timestamp header is required")
        if timestamp is None:
            return body
        try:
            seconds = int(timestamp.strip())
        except ValueError:
            raise Unauthenticated("timestamp header is not unix seconds") from None
        # Chained int/float comparison is exact; ``now - seconds`` overflows for huge ints.
        if not now - self._tolerance <= seconds <= now + self._tolerance:
            raise Unauthenticated("timestamp outside tolerance")
        return f"{seconds}.".encode() + body

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """Read ``message_id``, ``payload`` and an attempt counter if present."""
        return self.parse_body(queue, request.body)

    def parse_body(self, queue: str, body: bytes) -> Delivery:
        """The envelope's delivery (the body alone carries everything)."""
        try:
            envelope = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise MalformedDelivery("body is not JSON") from None
        if not isinstance(envelope, dict):
            raise MalformedDelivery("body is not a JSON object")
        message_id = envelope.get("message_id")
        if (
            not isinstance(message_id, str | int)
            or isinstance(message_id, bool)
            or message_id == ""
        ):
            raise MalformedDelivery("message_id is missing")
        return Delivery(
            queue=queue,
            message_id=str(message_id)[:255],
            payload=_payload(envelope.get("payload")),
            attempt=_attempt(envelope),
        )


def _payload(raw: Any) -> Any:
    # Some senders wrap the payload as a JSON string; accept both.
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw


def _attempt(envelope: dict[str, Any]) -> int | None:
    for name in _ATTEMPT_FIELDS:
        value = envelope.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
