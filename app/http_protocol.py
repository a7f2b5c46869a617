"""uvicorn's HTTP protocol with each answer leaving in one send, not one for its head and one
for its body.

uvicorn writes an answer's status line and headers when the application sends
``http.response.start`` and its body when it sends ``http.response.body``: two ``send``
system calls for every answer with a body (the bare 204 route the push benchmark compares
against makes one). In a profile of duplicate deliveries the two were 26% of a worker's
CPU, the body's 7.6%; joined, a duplicate cost a few percent less (``bench/README.md``).
ASGI has no message that carries both, so the joining is done under uvicorn: the protocol
sees its transport through :class:`JoinedWrites`, which holds what is written until the
answer is complete, or at the latest until the event loop's next turn (a streamed answer
still leaves chunk by chunk, one turn late), or until it holds 64 KiB (so a large answer meets
the transport's flow control as before).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HELD_AT_MOST = 64 * 1024  # bytes held before they are written anyway


class JoinedWrites:
    """A transport whose writes within one turn of the event loop leave as one write.

    Everything but ``write`` is the real transport's. Closing sends what is held first; a
    lost connection drops it, as the real transport drops its own buffer.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)
        self._size += len(data)
        if self._size >= HELD_AT_MOST:
            self.flush()

    def flush(self) -> None:
        """Send what is held (once the answer is complete, the loop turns, or it is large)."""
        if self._held:
            data = self._held[0] if len(self._held) == 1 else b"".join(self._held)
            self._held.clear()
            self._size = 0
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class JoinedWritesProtocol(HttpToolsProtocol):
    """uvicorn's protocol writing through :class:`JoinedWrites`: an answer in one send."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.joined = JoinedWrites(transport, self.loop)
        super().connection_made(self.joined)  # type: ignore[arg-type]

    def on_response_complete(self) -> None:
        self.joined.flush()  # the answer is whole: send it now, not a loop turn later
        super().on_response_complete()
