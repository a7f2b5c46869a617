"""Wire the operations surface into an app: operator API, admin page, metrics, request ids."""

from __future__ import annotations

from fastapi import FastAPI

from app.api.request_log import RequestLogMiddleware

from . import audit, dead_letters, metrics, queue_dead_letters, suppressions
from .errors import serve_html_errors
from .ui import admin, admin_suppressions


def install_operations(app: FastAPI) -> None:
    """Add the operator routes and middleware to an app (called once by ``create_app``)."""
    app.include_router(dead_letters.router)
    app.include_router(queue_dead_letters.router)
    app.include_router(audit.router)
    app.include_router(suppressions.router)
    app.include_router(admin.router)
    app.include_router(admin_suppressions.router)
    serve_html_errors(app, admin.router.prefix, admin.error_page)  # a browser's pages
    app.include_router(metrics.router)
    app.add_middleware(RequestLogMiddleware)
