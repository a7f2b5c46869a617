"""Shared-secret checks used by several push formats: the ``sha256=`` HMAC and a plain token.

Every configured secret is tried without an early exit (rotation: current first, next or
previous after), so timing does not reveal which secret matched.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from app.domain.errors import Unauthenticated


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """The ``sha256=<hex>`` signature a sender puts in the signature header."""
    signed = body if timestamp is None else f"{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def check_hmac(secrets: Sequence[bytes], signed: bytes, header_value: str | None) -> None:
    """Raise ``Unauthenticated`` unless ``header_value`` is the HMAC of ``signed``."""
    if not header_value:
        raise Unauthenticated("missing signature header")
    received = _signature_bytes(header_value)
    matched = False
    for secret in secrets:
        expected = hmac.new(secret, signed, hashlib.sha256).digest()
        matched |= hmac.compare_digest(expected, received)
    if not matched:
        raise Unauthenticated("signature does not match")


def check_token(secrets: Sequence[bytes], token: str | None) -> None:
    """Raise ``Unauthenticated`` unless ``token`` equals one of the secrets."""
    if not token:
        raise Unauthenticated("missing token")
    received = token.encode()
    matched = False
    for secret in secrets:
        matched |= hmac.compare_digest(secret, received)
    if not matched:
        raise Unauthenticated("token does not match")


def _signature_bytes(header_value: str) -> bytes:
    value = header_value.strip()
    if value.lower().startswith("sha256="):
        value = value[len("sha256=") :]
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise Unauthenticated("signature is not hex") from None
