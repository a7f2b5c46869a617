"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served from installed assets, never a CDN.

FastAPI's own pages load their scripts from a CDN, so they are blank wherever the service
has no internet access. The fastapi-offline package ships the Swagger UI and ReDoc bundles
(and keeps them current); they are served here under ``/docs/assets`` and the pages are
FastAPI's, pointed at them. ReDoc also shows its maker's logo from a CDN on every page: the
pages allow images from this service only, so the browser never asks another host for
anything (the logo hides itself when it cannot load).
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs/assets"
_ONLY_OWN_IMAGES = {"Content-Security-Policy": "img-src 'self' data:"}


def install_docs(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and their assets to an app built with no docs of its own."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            # No validator badge: it is an image from swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        )
        page.headers.update(_ONLY_OWN_IMAGES)
        return page

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        page.headers.update(_ONLY_OWN_IMAGES)
        return page
