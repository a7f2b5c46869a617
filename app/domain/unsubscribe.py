"""Signed unsubscribe links: one per (customer, channel), verifiable without a database.

A token is ``base64url(customer_id "\\n" channel) "." base64url(HMAC-SHA256)[:16 bytes]``
under ``REMINDERS_UNSUBSCRIBE_SECRET``. Tokens do not expire: an unsubscribe link in an old
email must keep working (RFC 8058 one-click). Rotating the secret invalidates old links.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

from .errors import NotFound

_CONTEXT = b"reminder-relay unsubscribe v1\n"
_MAC_BYTES = 16


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class UnsubscribeLinks:
    """Issues and checks unsubscribe tokens; ``base_url`` is the service's public URL."""

    base_url: str
    secret: bytes

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self.secret, _CONTEXT + payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def token_for(self, customer_id: str, channel: str) -> str:
        """The token that unsubscribes ``customer_id`` from ``channel``."""
        payload = f"{customer_id}\n{channel}".encode()
        return f"{_encode(payload)}.{_encode(self._mac(payload))}"

    def url_for(self, customer_id: str, channel: str) -> str:
        """The public one-click unsubscribe URL for a customer and channel."""
        return f"{self.base_url.rstrip('/')}/unsubscribe/{self.token_for(customer_id, channel)}"

    def read(self, token: str) -> tuple[str, str]:
        """(customer_id, channel) of an authentic token; ``NotFound`` for anything else."""
        encoded_payload, _, encoded_mac = token.partition(".")
        try:
            payload, mac = _decode(encoded_payload), _decode(encoded_mac)
            customer_id, channel = payload.decode().split("\n")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise NotFound("unknown unsubscribe link") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise NotFound("unknown unsubscribe link")
        return customer_id, channel
