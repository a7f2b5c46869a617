"""The one shared outbound HTTP client, and how its failures are classified.

The client is plain aiohttp: measured against httpx's default transport and httpx over the
``httpx-aiohttp`` transport at 1/16/64 concurrent requests (``bench/http_clients.py``, numbers
in the README), it was fastest everywhere and did not collapse under concurrency. Its
exceptions also say precisely whether a request can have reached the server, which the
unknown-outcome class depends on (``httpx-aiohttp`` maps a server disconnect to
``ConnectTimeout``). The session is created on first use, inside the running loop, and closed
by the application's lifespan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.domain.clock import utc_now
from app.domain.errors import ProviderError, RateLimitedError, TransientProviderError
from app.domain.retry import parse_retry_after

if TYPE_CHECKING:
    import aiohttp

# aiohttp is imported where a request is made (~7 MB per process): a worker whose channels
# and queue make no HTTP call (the outbox, the embedded queue in process) never loads it.

# Responses we read at most this much of: a misbehaving endpoint cannot make us buffer more.
MAX_RESPONSE_BYTES = 16 * 1024
# The share of the send timeout a TCP (+ TLS) connect may take.
CONNECT_SHARE = 0.5


class SharedHttp:
    """Holds the process's pooled ``aiohttp.ClientSession``; providers borrow it per request."""

    def __init__(self, *, max_connections: int = 100) -> None:
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """The shared session, created on first use (it must be made inside the event loop)."""
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, ttl_dns_cache=60)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, trust_env=False
            )
        return self._session

    async def aclose(self) -> None:
        """Close the pool (at shutdown)."""
        if self._session is not None and not self._session.closed:
            await self._session.close()


def client_timeout(timeout: float) -> aiohttp.ClientTimeout:
    """Whole-request deadline ``timeout``; the connect phase gets a share of it."""
    import aiohttp

    return aiohttp.ClientTimeout(total=timeout, sock_connect=timeout * CONNECT_SHARE)


async def read_capped(response: aiohttp.ClientResponse, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """At most ``limit`` bytes of the body; the rest is never read (the connection is dropped)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await response.content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None when absent or invalid."""
    return parse_retry_after(value, now or utc_now())


def classify_transport_error(error: BaseException, *, what: str) -> ProviderError:
    """A transport failure as a provider error: did the request possibly reach the server?

    Failures before the request was written (DNS, connect, TLS handshake, connect timeout)
    are plain transient errors. Timeouts and disconnects after that are ``unknown_outcome``:
    the server may have acted on the request, so the retry relies on the idempotency key.
    """
    import aiohttp

    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return TransientProviderError(f"{what}: connect timed out", detail_class="connect_timeout")
    if isinstance(error, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        return TransientProviderError(f"{what}: TLS handshake failed", detail_class="tls_error")
    if isinstance(error, aiohttp.ClientConnectorError):
        return TransientProviderError(
            f"{what}: cannot connect ({type(error.os_error).__name__})",
            detail_class="connect_error",
        )
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return TransientProviderError(
            f"{what}: timed out after the request was sent; it may have been accepted",
            detail_class="unknown_outcome",
        )
    return TransientProviderError(
        f"{what}: connection failed mid-request ({type(error).__name__}); "
        "it may have been accepted",
        detail_class="unknown_outcome",
    )


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A provider's answer: status, headers and at most ``MAX_RESPONSE_BYTES`` of body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


async def post_capped(
    http: SharedHttp,
    url: str,
    *,
    data: bytes,
    headers: Mapping[str, str],
    timeout: float,
    what: str,
    **request_options: Any,
) -> HttpAnswer:
    """POST without following redirects; a transport failure becomes a classified error."""
    import aiohttp

    try:
        async with http.session().post(
            url,
            data=data,
            headers=dict(headers),
            allow_redirects=False,
            timeout=client_timeout(timeout),
            **request_options,
        ) as response:
            return HttpAnswer(response.status, response.headers, await read_capped(response))
    except (aiohttp.ClientError, TimeoutError) as error:
        raise classify_transport_error(error, what=what) from error


def raise_if_retryable(answer: HttpAnswer, *, text: str, detail_prefix: str) -> None:
    """The retry ladder every HTTP provider shares: 429 → rate limited (its ``Retry-After``),
    408 and 5xx → transient ``{detail_prefix}_4xx``/``_5xx``; any other status returns."""
    if answer.status == 429:
        raise RateLimitedError(
            text,
            retry_after=retry_after_seconds(answer.headers.get("retry-after")),
            detail_class="rate_limited",
        )
    if answer.status == 408 or answer.status >= 500:
        raise TransientProviderError(text, detail_class=f"{detail_prefix}_{answer.status // 100}xx")
