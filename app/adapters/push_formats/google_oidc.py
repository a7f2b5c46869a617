"""Google OIDC tokens on push requests (Cloud Tasks, Pub/Sub), checked with google-auth.

Google signs each push's ``Authorization: Bearer`` token (RS256) with a key whose
certificate it publishes (``REMINDERS_GOOGLE_PUSH_CERTS_URL``). A token is accepted only when the
signature verifies with the key its ``kid`` names, the issuer is Google, ``aud`` is the
configured audience, ``email`` is the configured service account and ``email_verified`` is
true: Google warns that signature and audience alone would accept a token that any Google
service account minted for our URL.

Certificates are cached for their ``Cache-Control`` max-age, each parsed into a verifier
once. When they cannot be fetched (endpoint down, non-200, unparsable), the keys already held
keep verifying; a token naming a key we do not hold is then ``AuthenticationUnavailable``
(503: the queue retries), the same error SNS raises, never a 401 the queue would obey.
A token naming an unknown key triggers at most one refetch per ``refetch_interval``
(Google publishes new keys before it signs with them), so a flood of forged key ids cannot
make us hammer the certificate endpoint. google-auth's ``RSAVerifier`` checks the
signature; the claims are checked here against the caller's ``now`` (google-auth's own
``jwt.decode`` reads the wall clock and re-parses the certificate on every call).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from google.auth.crypt import RSAVerifier

from app.adapters.channels.http import SharedHttp, client_timeout, read_capped
from app.domain.errors import AuthenticationUnavailable, Unauthenticated

GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
DEFAULT_MAX_AGE = 3600.0
MAX_CERTIFICATE_BYTES = 64 * 1024
_MAX_AGE = re.compile(r"max-age=(\d+)")
log = logging.getLogger("reminders.push")

# Fetches the certificate document: (body, Cache-Control header or None).
CertificateFetch = Callable[[str], Awaitable[tuple[bytes, str | None]]]


@dataclass(frozen=True, slots=True)
class OidcRequirements:
    """What a push token must say: who it is for and which service account signed it."""

    audience: str
    service_account: str
    certs_url: str
    clock_skew_seconds: float = 60.0


class GoogleCertificates:
    """Google's signing keys by key id, fetched on demand and cached for their max-age."""

    def __init__(
        self, url: str, fetch: CertificateFetch, *, refetch_interval: float = 60.0
    ) -> None:
        self._url = url
        self._fetch = fetch
        self._refetch_interval = refetch_interval
        self._verifiers: dict[str, RSAVerifier] = {}
        self._expires_at = 0.0
        self._fetched_at: float | None = None
        self._failed = False  # the last fetch failed: an unknown key id proves nothing

    async def verifier(self, key_id: str, *, now: float) -> RSAVerifier:
        """The verifier for ``key_id``; ``Unauthenticated`` when Google publishes no such key,
        ``AuthenticationUnavailable`` when we hold no such key and cannot fetch Google's."""
        if now >= self._expires_at or (key_id not in self._verifiers and self._may_refetch(now)):
            await self._refresh(now)
        verifier = self._verifiers.get(key_id)
        if verifier is None and self._failed:
            # Our outage, not a bad token: 503 makes the queue retry, a 401 would not.
            raise AuthenticationUnavailable("Google signing certificates cannot be fetched")
        if verifier is None:
            raise Unauthenticated("token signed by an unknown key")
        return verifier

    def _may_refetch(self, now: float) -> bool:
        return self._fetched_at is None or now - self._fetched_at >= self._refetch_interval

    async def _refresh(self, now: float) -> None:
        self._fetched_at = now
        try:
            body, cache_control = await self._fetch(self._url)
            certificates = orjson.loads(body)
            verifiers = {kid: RSAVerifier.from_string(pem) for kid, pem in certificates.items()}
        except Exception as error:  # keep the keys we had; try again after the interval
            log.warning("Google signing certificates unavailable: %s", type(error).__name__)
            self._expires_at = now + self._refetch_interval
            self._failed = True
            return
        self._verifiers = verifiers
        self._failed = False
        self._expires_at = now + _max_age(cache_control)


class GoogleOidcVerifier:
    """Checks the bearer token of one push request against ``OidcRequirements``."""

    def __init__(self, requirements: OidcRequirements, certificates: GoogleCertificates) -> None:
        self.requirements = requirements
        self._certificates = certificates

    async def verify(self, headers: Mapping[str, str], *, now: float) -> dict[str, Any]:
        """The token's claims; ``Unauthenticated`` names the first check that failed."""
        token = _bearer_token(headers)
        header, claims, signed, signature = _split_token(token)
        if header.get("alg") != "RS256" or not isinstance(header.get("kid"), str):
            raise Unauthenticated("token is not RS256 with a key id")
        verifier = await self._certificates.verifier(header["kid"], now=now)
        if not verifier.verify(signed, signature):
            raise Unauthenticated("token signature does not verify")
        self._check_claims(claims, now)
        return claims

    def _check_claims(self, claims: dict[str, Any], now: float) -> None:
        wanted, skew = self.requirements, self.requirements.clock_skew_seconds
        expires, issued = claims.get("exp"), claims.get("iat")
        if not isinstance(expires, int | float) or now - skew > expires:
            raise Unauthenticated("token expired")
        if not isinstance(issued, int | float) or issued > now + skew:
            raise Unauthenticated("token issued in the future")
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise Unauthenticated("token not issued by Google")
        if claims.get("aud") != wanted.audience:
            raise Unauthenticated("token audience is not ours")
        if claims.get("email") != wanted.service_account:
            raise Unauthenticated("token not from the configured service account")
        if claims.get("email_verified") is not True:
            raise Unauthenticated("token email is not verified")


def _bearer_token(headers: Mapping[str, str]) -> str:
    value = headers.get("authorization") or ""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("missing bearer token")
    return token.strip()


def _split_token(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    try:
        encoded_header, encoded_claims, encoded_signature = token.split(".")
        header = orjson.loads(_b64url(encoded_header))
        claims = orjson.loads(_b64url(encoded_claims))
        signature = _b64url(encoded_signature)
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        raise Unauthenticated("token is not a JWT") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise Unauthenticated("token is not a JWT")
    signed = f"{encoded_header}.{encoded_claims}".encode()
    return header, claims, signed, signature


def _b64url(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _max_age(cache_control: str | None) -> float:
    found = _MAX_AGE.search(cache_control or "")
    return float(found.group(1)) if found else DEFAULT_MAX_AGE


def http_certificate_fetch(http: SharedHttp, *, timeout: float = 5.0) -> CertificateFetch:
    """Fetch the certificate document through the service's shared HTTP pool."""

    async def fetch(url: str) -> tuple[bytes, str | None]:
        async with http.session().get(url, timeout=client_timeout(timeout)) as response:
            if response.status != 200:
                raise ValueError(f"certificate endpoint answered {response.status}")
            body = await read_capped(response, MAX_CERTIFICATE_BYTES)
            return body, response.headers.get("Cache-Control")

    return fetch


def build_oidc_verifier(requirements: OidcRequirements, http: SharedHttp) -> GoogleOidcVerifier:
    """A verifier whose certificates come from ``requirements.certs_url`` via ``http``."""
    fetch = http_certificate_fetch(http)
    return GoogleOidcVerifier(requirements, GoogleCertificates(requirements.certs_url, fetch))
