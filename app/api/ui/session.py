"""The admin page's login session and CSRF tokens, both derived from ``ADMIN_TOKEN``.

The cookie holds ``<issued unix seconds>.<random id>.<HMAC(admin token, issued.id)>``,
never the token itself: every login gets its own value (two logins in the same second
too), and logout revokes that id on the server (``admin_session_revocations``), so a copy
of the cookie stops working at once. Rotating the admin token ends every session. Each
form carries a CSRF token, an HMAC of the session value, checked in constant time on
every POST (the cookie is also ``SameSite=Strict``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from pydantic import SecretStr

COOKIE_NAME = "rr_admin"
COOKIE_PATH = "/admin"
# ASCII digits of a plausible unix time, 32 hex digits of id, a hex HMAC: anything else
# (``²``, 5,000 digits) is simply not a session.
_COOKIE = re.compile(r"([0-9]{1,12})\.([0-9a-f]{32})\.([0-9a-f]{64})", re.ASCII)


@dataclass(frozen=True, slots=True)
class Session:
    """A valid session cookie: its value, its id and when it was issued (unix seconds)."""

    value: str
    session_id: str
    issued: int


def _mac(secret: SecretStr, purpose: str, value: str) -> str:
    key = secret.get_secret_value().encode()
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def issue_session(secret: SecretStr, *, now: float, session_id: str | None = None) -> str:
    """A new session cookie value (a fresh random id unless one is given)."""
    signed = f"{int(now)}.{session_id or secrets.token_hex(16)}"
    return f"{signed}.{_mac(secret, 'admin-session', signed)}"


def read_session(
    value: str | None, secret: SecretStr, *, now: float, max_age: float
) -> Session | None:
    """The session of an unexpired cookie signed with the current admin token, else None.

    Revocation (logout) is checked by the caller against the database.
    """
    match = _COOKIE.fullmatch(value or "")
    if match is None or not secret.get_secret_value():
        return None
    issued, session_id, signature = match.groups()
    if not 0 <= now - int(issued) <= max_age:
        return None
    expected = _mac(secret, "admin-session", f"{issued}.{session_id}")
    if not hmac.compare_digest(signature.encode(), expected.encode()):
        return None
    return Session(match.group(0), session_id, int(issued))


def csrf_token(secret: SecretStr, session: str) -> str:
    """The CSRF token forms of this session must carry."""
    return _mac(secret, "admin-csrf", session)


def csrf_is_valid(provided: str | None, secret: SecretStr, session: str) -> bool:
    """Constant-time check of a submitted CSRF token."""
    if not provided:
        return False
    return hmac.compare_digest(provided.encode(), csrf_token(secret, session).encode())
