"""``reminders serve``'s HTTP protocol sends each answer in one write (app/http_protocol.py).

uvicorn's own protocol runs here on a real event loop with a real ASGI application; the
transport records what reaches it, in order, which is what the test is about.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.server import ServerState

from app.http_protocol import JoinedWritesProtocol

GET = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"


class RecordingTransport(asyncio.Transport):
    """What the protocol hands the socket: each write and the close, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[bytes | str] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.events.append(bytes(data))

    def close(self) -> None:
        self.events.append("close")
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    @property
    def writes(self) -> list[bytes]:
        return [event for event in self.events if isinstance(event, bytes)]


async def _answer(send: Any, body: bytes = b'{"outcome":"duplicate"}') -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _connect(app: Any) -> tuple[JoinedWritesProtocol, RecordingTransport]:
    config = Config(app=app, lifespan="off", http="httptools", log_config=None)
    protocol = JoinedWritesProtocol(
        config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop()
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def _until(condition: Any, turns: int = 100) -> None:
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the protocol did not get there")


async def test_an_answer_with_a_body_leaves_in_one_write_as_soon_as_it_is_whole() -> None:
    answered = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _answer(send)
        wrote_by_then.extend(transport.writes)  # before the loop turns again
        answered.set()

    wrote_by_then: list[bytes] = []
    protocol, transport = _connect(app)
    protocol.data_received(GET)
    await asyncio.wait_for(answered.wait(), 5)

    assert len(wrote_by_then) == 1  # uvicorn alone writes the head, then the body
    assert wrote_by_then[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert wrote_by_then[0].endswith(b'\r\n\r\n{"outcome":"duplicate"}')


async def test_keep_alive_answers_each_leave_whole_and_in_order() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _answer(send, scope["path"].encode())

    protocol, transport = _connect(app)
    protocol.data_received(GET.replace(b"/x", b"/first"))
    await _until(lambda: len(transport.writes) == 1)
    protocol.data_received(GET.replace(b"/x", b"/second"))
    await _until(lambda: len(transport.writes) == 2)

    assert [write.rsplit(b"\r\n\r\n", 1)[1] for write in transport.writes] == [
        b"/first",
        b"/second",
    ]
    assert "close" not in transport.events


async def test_a_streamed_answer_still_leaves_chunk_by_chunk() -> None:
    more = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await more.wait()
        await send({"type": "http.response.body", "body": b"last"})

    protocol, transport = _connect(app)
    protocol.data_received(GET)
    await _until(lambda: len(transport.writes) == 1)  # the next loop turn, not the answer's end
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[0].endswith(b"5\r\nfirst\r\n")

    more.set()
    await _until(lambda: len(transport.writes) == 2)
    assert transport.writes[1] == b"4\r\nlast\r\n0\r\n\r\n"


async def test_what_is_held_is_written_before_the_connection_closes() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _answer(send)

    protocol, transport = _connect(app)
    protocol.data_received(GET.replace(b"Host: t\r\n", b"Host: t\r\nConnection: close\r\n"))
    await _until(lambda: "close" in transport.events)

    assert len(transport.events) == 2 and transport.events[1] == "close"
    assert transport.writes[0].endswith(b'{"outcome":"duplicate"}')


async def test_a_request_uvicorn_refuses_is_answered_then_closed() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not reached")

    protocol, transport = _connect(app)
    protocol.data_received(b"NOT HTTP AT ALL\r\n\r\n")
    await _until(lambda: "close" in transport.events)

    assert transport.writes[0].startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert transport.events[-1] == "close"


async def test_a_large_answer_is_written_as_it_grows_not_held_whole() -> None:
    chunk = b"x" * 40_000

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(5):  # no await that yields: flow control sees it only when written
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            sizes.append(sum(len(write) for write in transport.writes))
        await send({"type": "http.response.body", "body": b""})

    sizes: list[int] = []
    protocol, transport = _connect(app)
    protocol.data_received(GET)
    await _until(lambda: b"0\r\n\r\n" in b"".join(transport.writes))

    assert sizes[0] == 0  # the head and the first chunk wait: less than 64 KiB
    assert sizes[1] > 80_000  # the second chunk made it 64 KiB: both were written
    assert b"".join(transport.writes).count(chunk) == 5
