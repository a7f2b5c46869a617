"""The application with a short path for ``POST /push/{queue}``, the hot path.

Every other request goes through FastAPI's stack as built. A push goes through the same
error handling and the same user middleware (request id and access line, the request
guard, tracing when installed), in the same order, but not through what a delivery does
not use: FastAPI's per-request ``AsyncExitStack`` (for dependencies and uploaded files;
the push route has neither), the router's walk over every route of the API to find this
one, and Starlette's per-route request/response wrapper with its second exception
boundary. Those layers were ~12% of a duplicate delivery's server CPU (bench/README.md).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi._body_limit import AppBodyLimitMiddleware
from fastapi.telemetry._asgi import ExceptionTelemetryMiddleware
from starlette.middleware import Middleware
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .push import PUSH_PREFIX, push


class RelayApp(FastAPI):
    """FastAPI, with pushes taken off the general stack before routing (see module doc)."""

    def build_middleware_stack(self) -> ASGIApp:
        """The general stack, and beside it the push route behind the same middleware."""
        return PushShortcut(super().build_middleware_stack(), self._push_stack())

    def _push_stack(self) -> ASGIApp:
        # FastAPI's own layering (build_middleware_stack) around the push endpoint instead
        # of the router, without AsyncExitStackMiddleware: the same answers for the same
        # errors (a 500 from ServerErrorMiddleware, our error bodies from the handlers).
        error_handler = None
        handlers: dict[Any, Any] = {}
        for key, value in self.exception_handlers.items():
            if key in (500, Exception):
                error_handler = value
            else:
                handlers[key] = value
        layers = [
            Middleware(ServerErrorMiddleware, handler=error_handler, debug=self.debug),
            Middleware(ExceptionTelemetryMiddleware),
            Middleware(AppBodyLimitMiddleware, max_body_size=self.max_body_size),
            *self.user_middleware,
            Middleware(ExceptionMiddleware, handlers=handlers, debug=self.debug),
        ]
        app: ASGIApp = self._push_endpoint
        for cls, args, kwargs in reversed(layers):
            app = cls(app, *args, **kwargs)
        return app

    async def _push_endpoint(self, scope: Scope, receive: Receive, send: Send) -> None:
        # What the router would have put in the scope for this route, then the route.
        scope["router"] = self.router
        scope["endpoint"] = push
        scope["path_params"] = {"queue": scope["path"][len(PUSH_PREFIX) :]}
        response = await push(Request(scope, receive, send))
        await response(scope, receive, send)


class PushShortcut:
    """Pure ASGI: a request the push route would match goes to ``push``, the rest to ``app``."""

    def __init__(self, app: ASGIApp, push_stack: ASGIApp) -> None:
        self.app = app
        self.push_stack = push_stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Dispatch one connection scope."""
        if scope["type"] == "http" and is_push(scope):
            await self.push_stack(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def is_push(scope: Scope) -> bool:
    """Whether the router would send this request to ``push``: POST /push/{one segment}.

    Anything else (another method: 405; ``/push/a/b`` or a trailing slash: 404 or the
    redirect; a root path to strip) takes the general stack, which answers as before.
    """
    path: str = scope["path"]
    return (
        scope["method"] == "POST"
        and path.startswith(PUSH_PREFIX)
        and len(path) > len(PUSH_PREFIX)
        and "/" not in path[len(PUSH_PREFIX) :]
        and not scope.get("root_path")
    )
