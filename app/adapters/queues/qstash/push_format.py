"""Upstash QStash pushes: our raw JSON body, authenticated by the ``Upstash-Signature`` JWT.

As Upstash documents it (and its SDK receivers check): an HS256 JWT signed with the
current or, during a rotation, the next signing key; ``iss`` = ``Upstash``; ``sub`` = the
destination URL; ``exp`` / ``nbf``; ``body`` = base64url SHA-256 of the raw body (padding
ignored). ``sub`` is compared with the public URL we configured for this queue's push
route, never with the URL of the request, which a proxy may have rewritten. Message id
from ``Upstash-Message-Id``; ``Upstash-Retried`` counts earlier attempts (0 on the first).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
import orjson

from app.domain.errors import MalformedDelivery, Unauthenticated
from app.domain.messages import Delivery, PushRequest

ISSUER = "Upstash"
_REQUIRED_CLAIMS = ["iss", "sub", "exp", "nbf", "body"]


def body_hash(body: bytes) -> str:
    """The ``body`` claim for these bytes: base64url SHA-256 without padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode().rstrip("=")


class QStashPushFormat:
    """Verifies ``Upstash-Signature`` for one queue's push URL and reads the raw body."""

    name = "qstash"

    def __init__(
        self,
        signing_keys: Sequence[bytes],
        *,
        push_url: str,
        leeway_seconds: float = 30,
    ) -> None:
        if not signing_keys:
            raise ValueError("at least one QStash signing key is required")
        # Parsed once: PyJWT would otherwise re-check each raw key on every push.
        self._keys = tuple(_hmac_key(key) for key in signing_keys)
        self._push_url = push_url
        self._leeway = leeway_seconds

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless a signing key signed this body for our URL."""
        body = request.body
        token = request.headers.get("upstash-signature")
        if not token:
            raise Unauthenticated("missing Upstash-Signature header")
        claims = self._verified_claims(token)
        if claims.get("iss") != ISSUER:
            raise Unauthenticated("Upstash-Signature issuer is not Upstash")
        if not hmac.compare_digest(str(claims.get("sub")), self._push_url):
            raise Unauthenticated("Upstash-Signature subject is not this queue's push URL")
        _check_times(claims, now, self._leeway)
        claimed = str(claims.get("body", "")).rstrip("=")
        if not hmac.compare_digest(claimed, body_hash(body)):
            raise Unauthenticated("Upstash-Signature body hash does not match the body")

    def _verified_claims(self, token: str) -> dict[str, Any]:
        # Times are checked against the injected clock below, not PyJWT's wall clock.
        options = {"require": _REQUIRED_CLAIMS, "verify_exp": False, "verify_nbf": False}
        for key in self._keys:  # current first, then next (rotation)
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key,
                    algorithms=["HS256"],
                    options=options,  # type: ignore[arg-type]
                )
            except jwt.InvalidSignatureError:
                continue
            except jwt.PyJWTError as error:
                raise Unauthenticated(f"Upstash-Signature is not a valid JWT: {error}") from None
            return claims
        raise Unauthenticated("Upstash-Signature is not signed by a configured key")

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """Our payload is the body itself; ids and attempts come from QStash's headers."""
        body, headers = request.body, request.headers
        message_id = headers.get("upstash-message-id", "")
        if not message_id:
            raise MalformedDelivery("Upstash-Message-Id is missing")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise MalformedDelivery("body is not JSON") from None
        return Delivery(queue, message_id[:255], payload, _attempt(headers))


def _hmac_key(secret: bytes) -> jwt.PyJWK:
    encoded = base64.urlsafe_b64encode(secret).decode().rstrip("=")
    return jwt.PyJWK({"kty": "oct", "k": encoded, "alg": "HS256"}, "HS256")


def _check_times(claims: Mapping[str, Any], now: float, leeway: float) -> None:
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or not isinstance(nbf, int | float):
        raise Unauthenticated("Upstash-Signature exp/nbf are not numbers")
    if now > exp + leeway:
        raise Unauthenticated("Upstash-Signature has expired")
    if now < nbf - leeway:
        raise Unauthenticated("Upstash-Signature is not valid yet")


def _attempt(headers: Mapping[str, str]) -> int | None:
    retried = headers.get("upstash-retried", "")
    return int(retried) + 1 if retried.isdigit() and len(retried) < 6 else None
