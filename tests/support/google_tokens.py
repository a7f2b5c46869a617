"""Google-style OIDC tokens for tests: a test RSA key, its certificate served on loopback.

Tokens are minted with google-auth's own signer, exactly as Google shapes them for Cloud
Tasks and Pub/Sub pushes (RS256, ``kid``, ``iss``, ``aud``, ``email``, ``email_verified``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import crypt, jwt

from tests.support.certificates import self_signed_pem

SERVICE_ACCOUNT = "pusher@test-project.iam.gserviceaccount.com"
AUDIENCE = "https://reminders.example.test/push"


@dataclass
class SigningKey:
    """An RSA key with a key id and its self-signed certificate (PEM)."""

    kid: str
    private_pem: bytes
    certificate_pem: str
    _loaded: crypt.RSASigner | None = field(default=None, repr=False, compare=False)

    @classmethod
    def generate(cls, kid: str) -> SigningKey:
        """A fresh 2048-bit key."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = dt.datetime.now(dt.UTC)
        certificate = self_signed_pem(
            key, kid, not_before=now - dt.timedelta(days=1), not_after=now + dt.timedelta(days=30)
        )
        private_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cls(kid, private_pem, certificate.decode())

    def mint(self, now: float, **overrides: Any) -> str:
        """A token as Google mints it for a push, valid for an hour from ``now``."""
        claims = {
            "iss": "https://accounts.google.com",
            "aud": AUDIENCE,
            "email": SERVICE_ACCOUNT,
            "email_verified": True,
            "sub": "1234567890",
            "iat": int(now),
            "exp": int(now) + 3600,
        } | overrides
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(self._signer(), claims).decode()

    def _signer(self) -> crypt.RSASigner:
        # Loading a PEM key validates it (~tens of ms): once per key, not once per token.
        if self._loaded is None:
            self._loaded = crypt.RSASigner.from_string(self.private_pem, key_id=self.kid)
        return self._loaded


@dataclass
class CertificateServer:
    """Serves ``{kid: certificate}`` like Google's v1 certs endpoint; counts fetches."""

    keys: list[SigningKey]
    max_age: int = 3600
    fetches: int = 0
    status: int = 200  # anything else: answered instead of the certificates
    url: str = ""
    _runner: web.AppRunner | None = field(default=None, repr=False)

    async def _certs(self, request: web.Request) -> web.Response:
        self.fetches += 1
        if self.status != 200:  # an outage on Google's side
            return web.Response(status=self.status, text="unavailable")
        body = json.dumps({key.kid: key.certificate_pem for key in self.keys})
        headers = {"Cache-Control": f"public, max-age={self.max_age}, must-revalidate"}
        return web.Response(body=body, content_type="application/json", headers=headers)


@asynccontextmanager
async def certificate_server(keys: list[SigningKey]) -> AsyncIterator[CertificateServer]:
    """A certificate endpoint on a free loopback port."""
    server = CertificateServer(keys)
    app = web.Application()
    app.router.add_get("/oauth2/v1/certs", server._certs)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"http://127.0.0.1:{port}/oauth2/v1/certs"
    try:
        yield server
    finally:
        await runner.cleanup()
