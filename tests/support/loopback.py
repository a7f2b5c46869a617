"""Serve an aiohttp app on a free loopback port (test stand-ins for third-party servers)."""

from __future__ import annotations

import ssl

from aiohttp import web


async def serve(
    app: web.Application, *, port: int = 0, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, int]:
    """Start ``app`` on 127.0.0.1 (``port`` 0: a free one); the runner and the port.

    ``runner.cleanup()`` stops it."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
