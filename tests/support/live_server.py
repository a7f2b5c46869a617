"""Run the real app under uvicorn on a loopback port, in a thread with its own event loop."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from app.observability.logs import StdoutHandler


@contextmanager
def live_server(
    app: FastAPI, *, on_stop: Callable[[], Awaitable[None]] | None = None
) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1:<free port>; yields the base URL; stops and cleans up after.

    ``on_stop`` runs in the server's loop after shutdown (e.g. disposing an injected engine
    whose connections belong to that loop).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(server.serve(sockets=[sock]))
            if on_stop is not None:
                loop.run_until_complete(on_stop())
        except BaseException as error:  # surfaced to the test below
            failure.append(error)
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if failure or not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"server did not start: {failure}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        _drop_json_logging()
        if failure:
            raise failure[0]


def _drop_json_logging() -> None:
    # The app's lifespan installed the JSON stdout handler for the whole process; later
    # tests (and library threads outliving them) should not print through it.
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StdoutHandler)]:
        root.removeHandler(handler)
