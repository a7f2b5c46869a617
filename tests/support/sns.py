"""SNS as an HTTPS endpoint would see it: messages signed as AWS documents, the signing
certificate and the subscription-confirmation URL served over HTTPS on loopback.

The signing certificate is a throwaway RSA certificate; the HTTPS server presents a
certificate for ``localhost`` from a throwaway CA, so the push format's certificate store
is built with ``host_pattern="localhost"`` and a client that trusts that CA.
"""

from __future__ import annotations

import base64
import functools
import ssl
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.certificates import self_signed_pem
from tests.support.channel_servers import TlsMaterial
from tests.support.loopback import serve

TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:reminders"
HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}


def aws_string_to_sign(message: dict[str, Any]) -> bytes:
    """Written out from AWS's "Verifying the signatures of Amazon SNS messages", on purpose
    apart from the code under test: name, newline, value, newline, in byte-sorted order."""
    if message["Type"] == "Notification":
        names = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
    else:  # SubscriptionConfirmation, UnsubscribeConfirmation
        names = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"]
    return b"".join(f"{name}\n{message[name]}\n".encode() for name in names if name in message)


def signing_certificate(key: rsa.RSAPrivateKey, *, not_after: datetime | None = None) -> bytes:
    """A self-signed PEM certificate for ``key`` (what SigningCertURL serves)."""
    start = datetime(2020, 1, 1, tzinfo=UTC)
    return self_signed_pem(
        key,
        "sns.amazonaws.com",
        not_before=start,
        not_after=not_after or start + timedelta(days=3650 * 3),
    )


@dataclass
class SnsHost:
    """An HTTPS server on loopback standing in for ``sns.<region>.amazonaws.com``."""

    key: rsa.RSAPrivateKey = field(default_factory=lambda: _shared_material()[2])
    certificate_fetches: int = 0
    confirmations: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def cert_url(self) -> str:
        return f"{self.base_url}/SimpleNotificationService-test.pem"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/SimpleNotificationService-test.pem", self._certificate)
        app.router.add_get("/", self._confirm)
        self._runner, self.port = await serve(app, ssl_context=_shared_material()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _certificate(self, _request: web.Request) -> web.Response:
        self.certificate_fetches += 1
        return web.Response(body=signing_certificate(self.key), content_type="text/plain")

    async def _confirm(self, request: web.Request) -> web.Response:
        self.confirmations.append(request.query_string)
        return web.Response(text="<ConfirmSubscriptionResponse/>", content_type="text/xml")

    def sign(
        self, message: dict[str, Any], version: str = "1", *, cert_url: str | None = None
    ) -> dict[str, Any]:
        """The message with SignatureVersion, SigningCertURL and Signature as SNS sets them."""
        signed = {
            **message,
            "SignatureVersion": version,
            "SigningCertURL": cert_url or self.cert_url,
        }
        signature = self.key.sign(aws_string_to_sign(signed), padding.PKCS1v15(), HASHES[version]())
        return {**signed, "Signature": base64.b64encode(signature).decode()}

    def notification(
        self, payload: dict[str, Any], *, at: datetime, version: str = "1", **fields: Any
    ) -> dict[str, Any]:
        """A signed ``Notification`` carrying our payload as its ``Message`` string."""
        message = {
            "Type": "Notification",
            "MessageId": str(uuid.uuid4()),
            "TopicArn": TOPIC_ARN,
            "Message": orjson.dumps(payload).decode(),
            "Timestamp": _timestamp(at),
            "UnsubscribeURL": f"{self.base_url}/?Action=Unsubscribe",
            **fields,
        }
        return self.sign(message, version)

    def confirmation(
        self, *, at: datetime, kind: str = "SubscriptionConfirmation", **fields: Any
    ) -> dict[str, Any]:
        """A signed subscription (or unsubscribe) confirmation for ``TOPIC_ARN``."""
        token = uuid.uuid4().hex * 2
        message = {
            "Type": kind,
            "MessageId": str(uuid.uuid4()),
            "Token": token,
            "TopicArn": TOPIC_ARN,
            "Message": f"You have chosen to subscribe to the topic {TOPIC_ARN}.",
            "SubscribeURL": (
                f"{self.base_url}/?Action=ConfirmSubscription&TopicArn={TOPIC_ARN}&Token={token}"
            ),
            "Timestamp": _timestamp(at),
            **fields,
        }
        return self.sign(message)


@functools.cache
def _shared_material() -> tuple[ssl.SSLContext, ssl.SSLContext, rsa.RSAPrivateKey]:
    # A CA, a server certificate and a 2048-bit key cost ~0.3 s: once per run is enough.
    tls = TlsMaterial()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return tls.client_context(), tls.server_context(), key


def client_ssl() -> ssl.SSLContext:
    """A client TLS context trusting the loopback SNS host's certificate."""
    return _shared_material()[0]


def _timestamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def body(message: dict[str, Any]) -> bytes:
    """The raw bytes SNS posts (pretty-printed JSON, as SNS sends it)."""
    return orjson.dumps(message, option=orjson.OPT_INDENT_2)
