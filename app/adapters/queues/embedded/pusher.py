"""How the embedded queue's dispatcher reaches the receiver: signed HTTP POSTs over aiohttp.

``PushTarget`` builds the URL and the Infrai signature headers the push route checks;
``AiohttpPusher`` sends them over one pooled session (its pool holds up under
concurrency, where httpx's degrades). Any ``Pusher`` will do in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import orjson

from app.adapters.queues.infrai.push_format import sign
from app.db.queue_repo import ClaimedMessage

if TYPE_CHECKING:
    import aiohttp

_MAX_ANSWER_BYTES = 64 * 1024
_MAX_ERROR = 500


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where and how pushes are sent: the receiver's base URL and the signing secret."""

    base_url: str
    secret: bytes = field(repr=False)
    signature_header: str = "X-Infrai-Signature"
    timestamp_header: str | None = "X-Infrai-Timestamp"

    def url(self, queue: str) -> str:
        """The push URL of one queue."""
        return f"{self.base_url.rstrip('/')}/push/{quote(queue, safe='')}"

    def headers(self, body: bytes, now: float) -> dict[str, str]:
        """Content type and signature headers for one body, signed at ``now``."""
        headers = {"content-type": "application/json", "user-agent": "reminder-relay-embedded"}
        if self.timestamp_header:
            timestamp = int(now)
            headers[self.signature_header] = sign(self.secret, body, timestamp)
            headers[self.timestamp_header] = str(timestamp)
        else:
            headers[self.signature_header] = sign(self.secret, body)
        return headers


@dataclass(frozen=True, slots=True)
class PushResponse:
    """What the receiver answered."""

    status: int
    retry_after: str | None = None
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class PushResult:
    """One delivery and its answer (``status`` None: no answer)."""

    message: ClaimedMessage
    status: int | None
    retry_after: str | None = None
    outcome: str | None = None
    error: str | None = None
    released: bool = False  # never delivered: the dispatcher was stopping

    @property
    def acknowledged(self) -> bool:
        """2xx: the receiver is done with the message."""
        return self.status is not None and 200 <= self.status < 300


class Pusher(Protocol):
    """Sends one HTTP POST; raises ``PushFailed`` when no answer arrived."""

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, timeout: float
    ) -> PushResponse:
        """POST the body and return the answer."""
        ...


class PushFailed(Exception):
    """No HTTP answer: connection refused or reset, timeout."""


class AiohttpPusher:
    """One pooled aiohttp session (its pool holds up under concurrency where httpx's degrades)."""

    def __init__(self, *, max_connections: int = 16) -> None:
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, timeout: float
    ) -> PushResponse:
        """POST with a total timeout; the answer body is read up to 64 KB for its outcome."""
        import aiohttp  # here: a dispatcher delivering in process never loads it (~7 MB)

        session = self._ensure_session()
        try:
            async with session.post(
                url, data=body, headers=dict(headers), timeout=aiohttp.ClientTimeout(total=timeout)
            ) as response:
                answer = await response.content.read(_MAX_ANSWER_BYTES)
                return PushResponse(
                    response.status, response.headers.get("Retry-After"), _outcome(answer)
                )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise PushFailed(f"{type(error).__name__}: {error}"[:_MAX_ERROR]) from error

    def _ensure_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            await self._session.close()


def _outcome(answer: bytes) -> str | None:
    try:
        document = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    outcome = document.get("outcome") if isinstance(document, dict) else None
    return outcome if isinstance(outcome, str) else None
