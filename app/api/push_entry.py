"""``POST /push/{queue}`` served ahead of the app's general stack.

A delivery is the service's busiest request and needs little of what the rest of the API
does per request: a search of the route table, FastAPI's telemetry and body-limit layers,
the credential checks of other routers, exception-handler lookup, an exit stack for
dependencies it has none of. Measured with ``bench/push.py``, those layers were about a
third of a duplicate delivery's CPU.

``ReminderRelayApp`` hands such a request to ``push_entry`` first. The same ``push``
handler answers it, behind the pieces that do matter to a delivery, each the one the
general stack uses: the request id and access line (``RequestLogMiddleware``), the body
cap and read deadline (``guard.guarded_receive``), our error bodies (``error_response``)
and Starlette's 500 for an unexpected error (``ServerErrorMiddleware``). Anything else
(another method, a path under a root path, an app traced by OpenTelemetry, whose server
spans are middleware) takes the general stack, where the same handler is the route.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request

from app.domain.errors import ReminderRelayError

from .errors import error_response
from .guard import guarded_receive
from .push import PUSH_PREFIX, push
from .request_log import RequestLogMiddleware


async def _push_endpoint(scope: Any, receive: Any, send: Any) -> None:
    container = scope["app"].state.container
    guarded = guarded_receive(receive, container.settings.push_max_body_bytes, container)
    try:
        response = await push(Request(scope, guarded))
    except ReminderRelayError as error:  # the body's deadline passed (408), or ours
        response = error_response(error)
    await response(scope, receive, send)


class ReminderRelayApp(FastAPI):
    """The FastAPI app, with deliveries served by ``push_entry`` (module docstring)."""

    direct_push = True  # off when OpenTelemetry instruments the app (``create_app``)
    _push_stack: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        queue = self._direct_push_queue(scope)
        if queue is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        scope["path_params"] = {"queue": queue}
        if self._push_stack is None:
            self._push_stack = ServerErrorMiddleware(
                RequestLogMiddleware(_push_endpoint), debug=self.debug
            )
        await self._push_stack(scope, receive, send)

    def _direct_push_queue(self, scope: Any) -> str | None:
        # The queue's name when this is a delivery the direct path serves, else None.
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not self.direct_push
            or self.root_path
            or scope.get("root_path")
        ):
            return None
        path: str = scope["path"]
        if not path.startswith(PUSH_PREFIX):
            return None
        queue = path[len(PUSH_PREFIX) :]
        return queue if queue and "/" not in queue else None  # the route's {queue}: one part
