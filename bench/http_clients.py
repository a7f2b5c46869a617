"""Outbound HTTP clients under concurrency: httpx's default transport, httpx over the
``httpx-aiohttp`` transport, and plain aiohttp, at 1/16/64 concurrent requests.

Run: ``.venv/bin/python -m bench.http_clients [--seconds 3]``. A fast aiohttp server runs in a
child process on 127.0.0.1 (so server work does not share the client's event loop); each
client keeps ``concurrency`` requests in flight for ``--seconds`` and reports requests/s and
p99 latency. The service uses whichever transport wins (see app/adapters/channels/http.py).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx
from aiohttp import web
from httpx_aiohttp import AiohttpTransport

BODY = b'{"to": "someone@example.com", "subject": "hi", "text": "hello"}'


def _serve(port: int) -> None:
    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"id": "ok"})

    app = web.Application()
    app.router.add_post("/emails", handle)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_for_port(port: int) -> None:
    for _ in range(100):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError("bench server did not start")


async def _drive(
    send: Callable[[], Awaitable[None]], concurrency: int, seconds: float
) -> tuple[float, float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await send()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 100 else max(latencies)
    return len(latencies) / elapsed, p99 * 1000


async def _bench_httpx(url: str, transport: httpx.AsyncBaseTransport | None, **kw: object):
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    async with httpx.AsyncClient(transport=transport, limits=limits, timeout=10) as client:

        async def send() -> None:
            response = await client.post(url, content=BODY)
            response.raise_for_status()

        return await _drive(send, **kw)  # type: ignore[arg-type]


async def _bench_aiohttp(url: str, **kw: object):
    connector = aiohttp.TCPConnector(limit=100)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def send() -> None:
            async with session.post(url, data=BODY) as response:
                await response.read()
                response.raise_for_status()

        return await _drive(send, **kw)  # type: ignore[arg-type]


async def main(seconds: float) -> None:
    """Start the server, measure every client at every concurrency, print a table."""
    port = _free_port()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,), daemon=True)
    server.start()
    try:
        await _wait_for_port(port)
        url = f"http://127.0.0.1:{port}/emails"
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        clients = {
            "httpx (default transport)": lambda **kw: _bench_httpx(url, None, **kw),
            "httpx + httpx-aiohttp": lambda **kw: _bench_httpx(
                url, AiohttpTransport(limits=limits), **kw
            ),
            "aiohttp": lambda **kw: _bench_aiohttp(url, **kw),
        }
        print(f"{'client':28} {'conc':>5} {'req/s':>9} {'p99 ms':>9}")
        for name, run in clients.items():
            for concurrency in (1, 16, 64):
                rate, p99 = await run(concurrency=concurrency, seconds=seconds)
                print(f"{name:28} {concurrency:5d} {rate:9.0f} {p99:9.1f}", flush=True)
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    asyncio.run(main(parser.parse_args().seconds))
