"""The admin page's login session and CSRF tokens, both derived from ``ADMIN_TOKEN``.

The cookie holds ``<issued unix seconds>.<HMAC(admin token, issued)>``, never the token
itself; rotating the admin token ends every session. Each form carries a CSRF token,
an HMAC of the session value, checked in constant time on every POST (the cookie is also
``SameSite=Strict``).
"""

from __future__ import annotations

import hashlib
import hmac

from pydantic import SecretStr

COOKIE_NAME = "rr_admin"
COOKIE_PATH = "/admin"
_MAX_ISSUED_DIGITS = 12


def _mac(secret: SecretStr, purpose: str, value: str) -> str:
    key = secret.get_secret_value().encode()
    return hmac.new(key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()


def issue_session(secret: SecretStr, *, now: float) -> str:
    """A new session cookie value."""
    issued = str(int(now))
    return f"{issued}.{_mac(secret, 'admin-session', issued)}"


def session_is_valid(value: str | None, secret: SecretStr, *, now: float, max_age: float) -> bool:
    """True for an unexpired cookie value signed with the current admin token."""
    if not value or not secret.get_secret_value():
        return False
    issued, _, signature = value.partition(".")
    # ASCII digits of a plausible unix time only: int() refuses "²" and 5,000-digit values.
    if not (issued.isascii() and issued.isdigit() and len(issued) <= _MAX_ISSUED_DIGITS):
        return False
    if not 0 <= now - int(issued) <= max_age:
        return False
    return hmac.compare_digest(signature.encode(), _mac(secret, "admin-session", issued).encode())


def csrf_token(secret: SecretStr, session: str) -> str:
    """The CSRF token forms of this session must carry."""
    return _mac(secret, "admin-csrf", session)


def csrf_is_valid(provided: str | None, secret: SecretStr, session: str) -> bool:
    """Constant-time check of a submitted CSRF token."""
    if not provided:
        return False
    return hmac.compare_digest(provided.encode(), csrf_token(secret, session).encode())
