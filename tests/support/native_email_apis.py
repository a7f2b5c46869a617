"""Postmark's and SendGrid's send APIs on loopback, answering as their documentation shows.

Postmark ``POST /email``: ``X-Postmark-Server-Token`` checked (401 ``{"ErrorCode": 10,
"Message": "No Account or Server API tokens were supplied in the HTTP headers..."}``),
200 ``{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}``, 422 with
``ErrorCode`` 300 for an invalid ``To`` and 406 for an inactive recipient.
SendGrid ``POST /v3/mail/send``: bearer key checked (401 ``{"errors": [{"message": "The
provided authorization grant is invalid, expired, or revoked", "field": null, "help":
null}]}``), 202 with an empty body and ``X-Message-Id``, 400 ``{"errors": [{"message",
"field", "help"}]}`` for a bad address. ``script`` holds answers to give first
(status, body, headers), or ``"accept_then_hang"``: record the message, never answer.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

ACCEPT_THEN_HANG = "accept_then_hang"


@dataclass
class FakeNativeApi:
    """One provider's send endpoint; ``accepted`` holds every message it took."""

    kind: str  # "postmark" | "sendgrid"
    credential: str
    script: list[Any] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    inactive: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        """The aiohttp application with the provider's route."""
        app = web.Application()
        if self.kind == "postmark":
            app.router.add_post("/email", self._postmark)
        else:
            app.router.add_post("/v3/mail/send", self._sendgrid)
        return app

    async def _scripted(self) -> web.Response | None:
        step = self.script.pop(0) if self.script else None
        if isinstance(step, tuple):
            status, body, headers = step
            if body is None:
                return web.Response(status=status, headers=headers)
            return web.json_response(body, status=status, headers=headers)
        if step == ACCEPT_THEN_HANG:
            self.script.insert(0, "hang_after_accept")
        return None

    async def _accepted(self, body: dict[str, Any], response: web.Response) -> web.Response:
        self.accepted.append(body)
        if self.script and self.script[0] == "hang_after_accept":
            self.script.pop(0)
            await self.release.wait()
        return response

    async def _postmark(self, request: web.Request) -> web.Response:
        if request.headers.get("X-Postmark-Server-Token") != self.credential:
            message = "No Account or Server API tokens were supplied in the HTTP headers."
            return web.json_response({"ErrorCode": 10, "Message": message}, status=401)
        if (scripted := await self._scripted()) is not None:
            return scripted
        body = json.loads(await request.read())
        to = body.get("To", "")
        if "@" not in to:
            return web.json_response(
                {"ErrorCode": 300, "Message": "Invalid 'To' address: '" + to + "'."}, status=422
            )
        if to in self.inactive:
            message = "You tried to send to recipient(s) that have been marked as inactive."
            return web.json_response({"ErrorCode": 406, "Message": message}, status=422)
        answer = {
            "To": to,
            "SubmittedAt": "2026-12-01T09:00:00.1234567-05:00",
            "MessageID": str(uuid.uuid4()),
            "ErrorCode": 0,
            "Message": "OK",
        }
        return await self._accepted(body, web.json_response(answer))

    async def _sendgrid(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.credential}":
            error = {
                "message": "The provided authorization grant is invalid, expired, or revoked",
                "field": None,
                "help": None,
            }
            return web.json_response({"errors": [error]}, status=401)
        if (scripted := await self._scripted()) is not None:
            return scripted
        body = json.loads(await request.read())
        to = body["personalizations"][0]["to"][0]["email"]
        if "@" not in to:
            error = {
                "message": "Does not contain a valid address.",
                "field": "personalizations.0.to.0.email",
                "help": "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html#message.personalizations.to",
            }
            return web.json_response({"errors": [error]}, status=400)
        message_id = uuid.uuid4().hex[:22]
        response = web.Response(status=202, headers={"X-Message-Id": message_id})
        return await self._accepted(body, response)
