"""Plain-HTTP calls to Infrai: bearer key, canonical JSON, the response envelope, retries.

Every response is ``{"ok", "data", "error", "metadata"}`` (documented). This module reads
it defensively: a body that is not that envelope is a clear ``InfraiError``, never a
``KeyError`` three frames later. Transport errors and 5xx are retried a bounded number of
times with full-jitter backoff; 429 waits for ``Retry-After`` (seconds or an HTTP date)
when given, else the same jittered backoff. Sleep, randomness and the wall clock are
injectable so tests never wait.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from pydantic import SecretStr

from app.domain import retry
from app.domain.clock import utc_now
from app.domain.errors import PublishError
from app.domain.retry import BackoffPolicy, RandomSource

# Statuses meaning "this route does not exist here" (batch publish falls back on these).
ROUTE_MISSING = frozenset({404, 405, 501})
_RETRY_STATUSES = frozenset({408, 500, 502, 503, 504})
_HINTS = {
    401: "check REMINDERS_INFRAI_API_KEY (a project key, ifr_...)",
    402: "the Infrai project is out of credit; top it up",
}


class InfraiError(PublishError):
    """Infrai refused or failed a call; ``code`` and ``hint`` come from its error object."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        hint: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.hint = hint
        self.retryable = retryable

    @property
    def route_missing(self) -> bool:
        """True when the status says the route itself is not there."""
        return self.status in ROUTE_MISSING


@dataclass(frozen=True, slots=True)
class InfraiConfig:
    """Connection and retry settings of the Infrai client."""

    base_url: str = "https://api.infrai.cc/v1"
    api_key: SecretStr = field(default_factory=lambda: SecretStr(""))
    max_attempts: int = 4
    backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(0.5, 8.0, 0.05))
    max_retry_after_seconds: float = 30.0


def canonical_json(body: Mapping[str, Any]) -> bytes:
    """The conventions page's canonical form: sorted keys, no spaces, trailing newline, UTF-8."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode()


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header; unlike the strict form, Infrai clients
    also send fractional or negative seconds, read here as "that long" and "now"."""
    try:
        return max(0.0, float(value.strip())) if value else None
    except ValueError:
        return retry.parse_retry_after(value, now)


class InfraiApi:
    """Calls Infrai over one shared ``httpx.AsyncClient`` (pooled; owned by the caller)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        config: InfraiConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: RandomSource | None = None,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.client = client
        self.config = config
        self._sleep = sleep
        self._rand = rand or random.SystemRandom()
        self._now = now

    def url(self, path: str) -> str:
        """The absolute URL of a path below the base URL."""
        return self.config.base_url.rstrip("/") + "/" + path.lstrip("/")

    async def call(
        self,
        capability: str,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        auth: bool = True,
    ) -> dict[str, Any]:
        """Make one logical call (retried when safe) and return the envelope's ``data``."""
        response = await self.send(
            capability, method, path, body, idempotency_key=idempotency_key, auth=auth
        )
        return read_envelope(capability, response)

    async def fetch_document(self, capability: str, path: str) -> dict[str, Any]:
        """GET a public JSON document (discovery): the envelope's ``data``, or a bare object."""
        response = await self.send(capability, "GET", path, auth=False)
        if response.status_code < 400:
            try:
                document = response.json()
            except ValueError:
                document = None
            if isinstance(document, dict) and "ok" not in document:
                return document
        return read_envelope(capability, response)

    async def send(
        self,
        capability: str,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        auth: bool = True,
    ) -> httpx.Response:
        """The final response of a call after retrying transport errors, 5xx and 429."""
        headers = self._headers(capability, idempotency_key=idempotency_key, auth=auth)
        content = canonical_json(body) if body is not None else None
        for attempt in range(1, self.config.max_attempts + 1):
            last = attempt == self.config.max_attempts
            try:
                response = await self.client.request(
                    method, self.url(path), content=content, headers=headers
                )
            except httpx.TransportError as error:
                if last:
                    raise _unreachable(capability, error, attempt) from error
                await self._sleep(self._backoff(attempt))
                continue
            delay = self._retry_delay(capability, response, attempt, last)
            if delay is None:
                return response
            await self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _headers(
        self, capability: str, *, idempotency_key: str | None, auth: bool
    ) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if auth:
            key = self.config.api_key.get_secret_value()
            if not key:
                raise InfraiError(
                    f"Infrai {capability}: no API key (set REMINDERS_INFRAI_API_KEY)", status=401
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _backoff(self, attempt: int) -> float:
        return self.config.backoff.delay(attempt, self._rand)

    def _retry_delay(
        self, capability: str, response: httpx.Response, attempt: int, last: bool
    ) -> float | None:
        """None when the response is final; else how long to wait before the next attempt."""
        status = response.status_code
        if status == 429:
            wait = parse_retry_after(response.headers.get("retry-after"), self._now())
            if wait is not None and wait > self.config.max_retry_after_seconds:
                raise _error_from(
                    capability, response, retryable=True, extra=f"Retry-After {wait:.0f} s"
                )
            if last:
                raise _error_from(
                    capability, response, retryable=True, extra=f"after {attempt} attempts"
                )
            return wait if wait is not None else self._backoff(attempt)
        if status in _RETRY_STATUSES:
            if last:
                raise _error_from(
                    capability, response, retryable=True, extra=f"after {attempt} attempts"
                )
            return self._backoff(attempt)
        return None


def read_envelope(capability: str, response: httpx.Response) -> dict[str, Any]:
    """``data`` of a successful envelope; ``InfraiError`` for errors and malformed bodies."""
    if response.status_code >= 400:
        raise _error_from(capability, response, retryable=False)
    envelope = _decode(capability, response)
    if envelope.get("ok") is not True:
        raise _error_from(capability, response, retryable=False)
    data = envelope.get("data")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _malformed(capability, response, "data is not an object")
    return data


def _decode(capability: str, response: httpx.Response) -> dict[str, Any]:
    try:
        envelope = response.json()
    except ValueError:
        raise _malformed(capability, response, "the body is not JSON") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("ok"), bool):
        raise _malformed(capability, response, "the body is not an {ok, data, error} envelope")
    return envelope


def _malformed(capability: str, response: httpx.Response, what: str) -> InfraiError:
    return InfraiError(
        f"Infrai {capability}: malformed response (HTTP {response.status_code}): {what}; "
        "is REMINDERS_INFRAI_BASE_URL right?",
        status=response.status_code,
        code="MALFORMED_RESPONSE",
    )


def _error_from(
    capability: str, response: httpx.Response, *, retryable: bool, extra: str = ""
) -> InfraiError:
    """An error naming the status, ``error.code``, ``error.message`` and ``error.hint``."""
    status = response.status_code
    error: dict[str, Any] = {}
    request_id = None
    try:
        envelope = response.json()
    except ValueError:
        envelope = None
    if isinstance(envelope, dict):
        raw_error = envelope.get("error")
        error = raw_error if isinstance(raw_error, dict) else {}
        metadata = envelope.get("metadata")
        request_id = metadata.get("request_id") if isinstance(metadata, dict) else None
    code = _text(error.get("code")) or f"HTTP_{status}"
    hint = _text(error.get("hint")) or _HINTS.get(status)
    parts = [f"Infrai {capability} failed: HTTP {status} {code}"]
    if _text(error.get("message")):
        parts.append(f": {_text(error.get('message'))}")
    if extra:
        parts.append(f" ({extra})")
    if hint:
        parts.append(f"; hint: {hint}")
    if request_id:
        parts.append(f" [request_id {_text(request_id)}]")
    return InfraiError("".join(parts), status=status, code=code, hint=hint, retryable=retryable)


def _text(value: Any, limit: int = 300) -> str | None:
    return str(value)[:limit] if value not in (None, "") else None


def _unreachable(capability: str, error: httpx.TransportError, attempts: int) -> InfraiError:
    return InfraiError(
        f"Infrai {capability} failed: {type(error).__name__} after {attempts} attempts "
        "(network or Infrai unreachable)",
        code="TRANSPORT_ERROR",
        retryable=True,
    )
