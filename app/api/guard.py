"""ASGI guard in front of every route: credentials before bodies; bodies capped and timed.

FastAPI reads and parses a request's body before it solves the route's dependencies, so a
bearer check written as a dependency ran only after an unauthenticated client had streamed
its whole body into memory (300 concurrent large bodies grew the process by 0.6-1.3 GB),
and such a client got 422 for its body before 401 for its credential. This guard answers
before the route reads anything:

1. **401** when a route's credential check fails: the ``require_*`` dependency its router
   declares (marked ``before_body`` in ``deps.py``), the same function, run first;
2. **413** when the declared or streamed body passes the cap — the push route's
   ``REMINDERS_PUSH_MAX_BODY_BYTES``, a router's own larger cap where it declares one (the
   batch routes), ``MAX_BODY_BYTES`` elsewhere — counted with the same
   ``BodyLimit`` as the routes' own capped reader, chunk by chunk;
3. **408** when the body has not arrived completely within
   ``REMINDERS_BODY_READ_TIMEOUT_SECONDS`` (a client trickling bytes must not hold a
   connection and a buffer indefinitely).

A route that turns a failed read into an answer of its own (FastAPI answers 400) is
overridden: the client gets the guard's 413 or 408.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, cast

from fastapi import APIRouter
from starlette.requests import Request
from starlette.routing import BaseRoute, Match

from app.container import Container
from app.domain.errors import (
    PayloadTooLarge,
    ReminderRelayError,
    RequestTimedOut,
    TooManyFailedAttempts,
    Unauthenticated,
)

from .deps import BodyLimit
from .errors import error_response
from .push import PUSH_PREFIX

# The largest JSON body of the API (a reminder's data is at most 16 KiB) with room to spare.
MAX_BODY_BYTES = 64 * 1024

Check = Callable[[Request, Container], None]


class _Receive:
    """The app's ``receive``: counts body bytes and enforces the deadline until the body ends."""

    def __init__(self, receive: Any, limit: BodyLimit, deadline: float) -> None:
        self.receive = receive
        self.limit = limit
        self.deadline = deadline
        self.body_done = False
        self.refusal: ReminderRelayError | None = None

    async def __call__(self) -> Any:
        if self.body_done:
            return await self.receive()  # e.g. waiting for http.disconnect: not body reading
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self.receive()
        except TimeoutError:
            self.refusal = RequestTimedOut("the request body did not arrive in time")
            raise self.refusal from None
        if message["type"] == "http.request":
            self.body_done = not message.get("more_body", False)
            try:
                self.limit.add(len(message.get("body", b"")))
            except PayloadTooLarge as error:
                self.refusal = error
                raise
        return message


def guarded_receive(receive: Any, cap: int, container: Container) -> _Receive:
    """``receive`` counted against ``cap`` and held to the body-read deadline from now."""
    deadline = asyncio.get_running_loop().time() + container.settings.body_read_timeout_seconds
    return _Receive(receive, BodyLimit(cap), deadline)


class RequestGuard:
    """Pure ASGI middleware; see the module docstring."""

    def __init__(
        self,
        app: Any,
        *,
        routers: Sequence[APIRouter],
        larger_bodies: Sequence[tuple[APIRouter, int]] = (),
    ) -> None:
        self.app = app
        caps = {id(router): cap for router, cap in larger_bodies}  # routers are not hashable
        self._routes: list[tuple[BaseRoute, list[Check], int]] = [
            (route, _credential_checks(router), caps.get(id(router), MAX_BODY_BYTES))
            for router in routers
            for route in router.routes
        ]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve one request behind the guard."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        container: Container = scope["app"].state.container
        settings = container.settings
        checks, cap = self._route_rules(scope, settings.push_max_body_bytes)
        guarded = guarded_receive(receive, cap, container)
        try:
            guarded.limit.check_declared(_header(scope, b"content-length"))
            for check in checks:
                check(Request(scope), container)
        except (PayloadTooLarge, Unauthenticated, TooManyFailedAttempts) as refusal:
            await error_response(refusal)(scope, receive, send)
            return
        await self._serve(scope, guarded, send)

    async def _serve(self, scope: Any, guarded: _Receive, send: Any) -> None:
        started = replaced = False

        async def send_or_replace(message: Any) -> None:
            nonlocal started, replaced
            if message["type"] == "http.response.start":
                started = True
                if guarded.refusal is not None:  # the route answered our refusal its own way
                    replaced = True
                    await error_response(guarded.refusal)(scope, guarded.receive, send)
                    return
            if not replaced:
                await send(message)

        try:
            await self.app(scope, guarded, send_or_replace)
        except (PayloadTooLarge, RequestTimedOut):
            if started or guarded.refusal is None:
                raise
            await error_response(guarded.refusal)(scope, guarded.receive, send)

    def _route_rules(self, scope: Any, push_cap: int) -> tuple[list[Check], int]:
        # (the credential checks, the body cap) of the route this request goes to.
        if scope["path"].startswith(PUSH_PREFIX):
            return [], push_cap  # authenticated by its signature over the capped body
        for route, checks, cap in self._routes:
            if route.matches(scope)[0] == Match.FULL:
                return checks, cap
        return [], MAX_BODY_BYTES


def _credential_checks(router: APIRouter) -> list[Check]:
    return [
        cast(Check, dependency.dependency)
        for dependency in router.dependencies
        if getattr(dependency.dependency, "before_body", False)
    ]


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None
