"""Real local servers the channel providers talk to in tests.

- ``SmtpServer``: aiosmtpd in a thread of the test process (plain, STARTTLS or implicit TLS,
  optional AUTH) that can be told to answer 421, 450 or 550, or to hang.
- ``FakeEmailApi``: an aiohttp app on 127.0.0.1 implementing the documented behaviour of a
  Resend-shaped ``POST /emails`` (bearer key, validation, idempotency-key replay, 409 on a
  reused key with another payload) plus scripted failures.
- ``WebhookSink``: an aiohttp app recording signed webhook POSTs, with scripted answers and
  a redirecting route.
"""

from __future__ import annotations

import asyncio
import email.policy
import hashlib
import json
import socket
import ssl
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from typing import Any

import trustme
from aiohttp import web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

HANG = "hang"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class TlsMaterial:
    """A throwaway CA and a server certificate for 127.0.0.1 / localhost."""

    ca: trustme.CA = field(default_factory=trustme.CA)

    def server_context(self) -> ssl.SSLContext:
        """A server-side context presenting the certificate."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client-side context trusting only the throwaway CA."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


# --- SMTP -------------------------------------------------------------------------------


class SmtpHandler:
    """aiosmtpd handler whose answers a test chooses with ``mode``."""

    def __init__(self) -> None:
        self.mode = "accept"  # accept | 421 | 450 | 550 | hang | hang_rcpt
        self.messages: list[EmailMessage] = []
        self.raw: list[bytes] = []  # the DATA exactly as received
        self.envelopes: list[tuple[str, list[str]]] = []
        self.release = threading.Event()

    async def _hang(self) -> None:
        # The server thread's loop waits (in an executor thread) until the test ends.
        await asyncio.to_thread(self.release.wait)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.mode == "550":
            return "550 5.1.1 <" + address + ">: no such user"
        if self.mode == "450":
            return "450 4.2.1 mailbox busy, try again later"
        if self.mode == "hang_rcpt":
            await self._hang()
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.mode == "421":
            return "421 4.3.2 service shutting down"
        if self.mode == HANG:
            await self._hang()
            return "451 4.3.0 gave up"
        self.raw.append(envelope.original_content)
        self.messages.append(message_from_bytes(envelope.content, policy=email.policy.default))
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return f"250 2.0.0 Ok: queued as Q{len(self.messages)}"


@dataclass
class SmtpServer:
    """A running aiosmtpd server and its handler."""

    host: str
    port: int
    handler: SmtpHandler
    controller: Controller


def _authenticator(username: str, password: str):
    def check(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode() == username and auth_data.password.decode() == password
        )
        return AuthResult(success=ok, handled=False)

    return check


@contextmanager
def smtp_server(
    *,
    security: str = "none",
    tls: TlsMaterial | None = None,
    credentials: tuple[str, str] | None = None,
    smtputf8: bool = False,
):
    """Run aiosmtpd on 127.0.0.1 (``security``: none | starttls | tls) for a ``with`` block;
    ``smtputf8``: the server offers SMTPUTF8 (RFC 6531), else it takes ASCII only."""
    handler = SmtpHandler()
    port = free_port()
    kwargs: dict[str, Any] = {"enable_SMTPUTF8": smtputf8}
    if security == "starttls":
        assert tls is not None
        kwargs.update(tls_context=tls.server_context(), require_starttls=True)
    elif security == "tls":
        assert tls is not None
        kwargs.update(ssl_context=tls.server_context())
    if credentials is not None:
        kwargs.update(
            authenticator=_authenticator(*credentials),
            auth_required=True,
            auth_require_tls=security != "none",
        )
    controller = Controller(handler, hostname="127.0.0.1", port=port, **kwargs)
    controller.start()
    try:
        yield SmtpServer("127.0.0.1", port, handler, controller)
    finally:
        handler.release.set()
        controller.stop()


# --- HTTP -------------------------------------------------------------------------------


@asynccontextmanager
async def serve(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve an aiohttp app on a real socket; yields its base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    port = free_port(host)
    site = web.TCPSite(runner, host, port)
    await site.start()
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{port}"
    finally:
        await runner.cleanup()


@dataclass
class FakeEmailApi:
    """Resend-shaped ``POST /emails``; ``script`` holds failures to answer first."""

    api_key: str
    script: list[Any] = field(
        default_factory=list
    )  # (status, body, headers) | HANG | "accept_then_hang"
    delivered: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _keys: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application()
        app.router.add_post("/emails", self._post)
        return app

    async def _post(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append({"headers": dict(request.headers), "body": raw})
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return _error(401, "missing_api_key", "Missing API key")
        if auth.removeprefix("Bearer ") != self.api_key:
            return _error(403, "invalid_api_key", "API key is invalid")
        step = self.script.pop(0) if self.script else None
        if step == HANG:
            await self.release.wait()
        elif isinstance(step, tuple):
            status, body, headers = step
            return web.json_response(body, status=status, headers=headers)
        response = self._accept(request.headers.get("Idempotency-Key"), raw)
        if step == "accept_then_hang":
            await self.release.wait()
        return response

    def _accept(self, key: str | None, raw: bytes) -> web.Response:
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "invalid_json", "body is not JSON")
        missing = [name for name in ("from", "to", "subject") if not body.get(name)]
        if missing:
            return _error(422, "validation_error", f"missing {missing}")
        digest = hashlib.sha256(raw).hexdigest()
        if key is not None and key in self._keys:
            seen_digest, answer = self._keys[key]
            if seen_digest != digest:
                return _error(409, "invalid_idempotent_request", "key reused with another body")
            return web.json_response(answer)  # replay: same id, no second email
        answer = {"id": str(uuid.uuid4())}
        if key is not None:
            self._keys[key] = (digest, answer)
        self.delivered.append(body)
        return web.json_response(answer)


def _error(status: int, name: str, message: str) -> web.Response:
    return web.json_response(
        {"statusCode": status, "name": name, "message": message}, status=status
    )


@dataclass
class WebhookSink:
    """Records webhook POSTs; ``script`` holds (status, headers) answers to give first."""

    script: list[Any] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    redirect_to: str = "http://169.254.169.254/latest/meta-data/"

    def app(self) -> web.Application:
        """The aiohttp application: ``/hook`` records, ``/moved`` redirects."""
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        app.router.add_post("/moved", self._moved)
        app.router.add_post("/huge", self._huge)
        return app

    async def _hook(self, request: web.Request) -> web.StreamResponse:
        self.received.append(
            {"headers": dict(request.headers), "body": await request.text(), "host": request.host}
        )
        step = self.script.pop(0) if self.script else (200, {})
        if step == HANG:
            await self.release.wait()
            step = (200, {})
        status, headers = step
        return web.Response(status=status, text="ok", headers=headers)

    async def _moved(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(self.redirect_to)

    async def _huge(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        await response.prepare(request)
        chunk = b"x" * 65536
        for _ in range(256):  # 16 MiB if anyone read it all
            await response.write(chunk)
        return response
