"""The yardstick of bench/push.py: a bare FastAPI app, one POST route taking a JSON body → 204.

``python -m bench.bare_app --port P [--workers N]`` serves it exactly as ``reminders serve``
serves the service (``app.supervisor.server_options``): uvicorn with ``--workers``
processes (default ``serve``'s own on PostgreSQL: one per core, at most 4), uvloop +
httptools when installed, proxy headers on, access log off, logging at INFO.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import uvicorn
from fastapi import FastAPI, Response

from app.cli.serve_workers import default_workers, usable_cores
from app.supervisor import server_options


def create_app() -> FastAPI:
    """The bare app: the same route shape as the push route, doing nothing but parse JSON."""
    app = FastAPI(title="bare")

    @app.post("/push/{queue}", status_code=204)
    async def push(queue: str, body: dict[str, Any]) -> Response:
        return Response(status_code=204)

    return app


def main() -> None:
    """Serve the bare app with the service's uvicorn settings."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument(
        "--workers", type=int, default=default_workers(is_sqlite=False, cores=usable_cores())
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(
        "bench.bare_app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        **server_options(),
    )


if __name__ == "__main__":
    main()
