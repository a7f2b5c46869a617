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
from datetime import datetime

import aiohttp

from app.domain.clock import utc_now
from app.domain.errors import ProviderError, TransientProviderError
from app.domain.retry import parse_retry_after

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
