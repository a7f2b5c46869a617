"""QStash as a push endpoint sees it: ``Upstash-Signature`` JWTs minted as Upstash documents.

Claims per Upstash's "Verify Signatures" page: iss "Upstash", sub = destination URL,
exp (five minutes after issue), nbf and iat = issue time, a unique jti, and body =
base64url SHA-256 of the raw body; HS256 with the signing key's string as the secret.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import jwt

CURRENT_KEY = "sig_test_current_5wKXQ6mPSerYPu6DRqYpA5dD"
NEXT_KEY = "sig_test_next_6Psg6RgxALRgP1zFSvuqUim5Nsqc"
PUSH_URL = "https://reminders.example.com/push/reminders"


def mint(
    raw: bytes,
    /,
    *,
    issued_at: float,
    key: str = CURRENT_KEY,
    sub: str = PUSH_URL,
    lifetime: float = 300,
    **overrides: Any,
) -> str:
    """A signature header value for the raw body ``raw`` delivered to ``sub``."""
    claims: dict[str, Any] = {
        "iss": "Upstash",
        "sub": sub,
        "exp": int(issued_at + lifetime),
        "nbf": int(issued_at),
        "iat": int(issued_at),
        "jti": f"jwt_{uuid.uuid4().hex}",
        "body": base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).decode(),
    }
    claims.update(overrides)
    return jwt.encode(claims, key, algorithm="HS256")


def push_headers(
    body: bytes,
    *,
    issued_at: float,
    message_id: str = "msg_1",
    retried: int = 0,
    **mint_options: Any,
) -> dict[str, str]:
    """The headers QStash sends with a delivery (lower-case, as the route reads them)."""
    return {
        "content-type": "application/json",
        "upstash-signature": mint(body, issued_at=issued_at, **mint_options),
        "upstash-message-id": message_id,
        "upstash-retried": str(retried),
    }
