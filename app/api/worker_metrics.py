"""The pull worker's own ``GET /metrics``, on ``REMINDERS_WORKER_METRICS_PORT``.

A worker that runs alone (its own container, no ``reminders serve`` beside it sharing
``PROMETHEUS_MULTIPROC_DIR``) is scraped here: its counters (messages received, acked,
nacked, given back and failed per queue; the backlog; deliveries by outcome) and its
``process_*`` figures. Closed as the service's ``/metrics`` is: the bearer token
``REMINDERS_METRICS_TOKEN`` unless ``REMINDERS_METRICS_PUBLIC=true``, with the same
throttle on failed checks. The ledger gauges and the audit stay on the service's
``/metrics``: one reading per deployment is enough, and a worker never reads the ledger
for them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import generate_latest

from app.container import Container

from .deps import ContainerDep, check_bearer
from .errors import install_error_handlers
from .metrics import CONTENT_TYPE, process_registry


def worker_metrics_app(container: Container) -> FastAPI:
    """A one-route app serving this process's metrics."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.container = container
    install_error_handlers(app)

    @app.get("/metrics")
    async def metrics(request: Request, container: ContainerDep) -> Response:
        settings = container.settings
        # Settings refuse an empty token outside dev mode unless the route is public.
        if not settings.metrics_public and settings.metrics_token.get_secret_value():
            check_bearer(request, container, "metrics_token")
        return Response(generate_latest(process_registry()), media_type=CONTENT_TYPE)

    return app


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the worker owns SIGTERM and SIGINT (a graceful
    stop gives back what it has not started, then this server closes)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving_worker_metrics(container: Container) -> AsyncIterator[None]:
    """Serve the worker's ``/metrics`` while the block runs, if a port is configured."""
    worker = container.settings.worker
    if not worker.metrics_port:
        yield
        return
    config = uvicorn.Config(
        worker_metrics_app(container), host=worker.metrics_host, port=worker.metrics_port,
        lifespan="off", access_log=False, log_config=None,
    )  # fmt: skip
    server = _Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        yield
    finally:
        server.should_exit = True
        await serving
