"""AWS SNS HTTP/S subscriptions: the SNS JSON envelope, sent as ``text/plain``.

Authentication follows AWS's documented message verification: the string to sign is
``Name\\nValue\\n`` for a fixed, byte-sorted list of fields per message type
(``Notification``: Message, MessageId, Subject if present, Timestamp, TopicArn, Type;
``SubscriptionConfirmation`` / ``UnsubscribeConfirmation``: Message, MessageId,
SubscribeURL, Timestamp, Token, TopicArn, Type), signed with RSA PKCS#1 v1.5 over SHA1
(``SignatureVersion`` 1) or SHA256 (2). The signing certificate is fetched over HTTPS
only from a host matching ``sns.<region>.amazonaws.com`` and cached by URL. The
``TopicArn`` must be one we configured: any AWS account can sign for its own topic.

SNS treats every 4xx answer as permanent and drops the message. A certificate we could
not fetch is our problem, not the sender's: ``AuthenticationUnavailable`` (503, retried).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import ssl as ssl_module
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from app.adapters.channels.http import SharedHttp, client_timeout, read_capped
from app.domain.errors import AuthenticationUnavailable, MalformedDelivery, Unauthenticated
from app.domain.messages import Delivery, PushRequest

log = logging.getLogger("reminders.push.sns")

SNS_HOST_PATTERN = r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?"
_NOTIFICATION_FIELDS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_CONFIRMATION_FIELDS = (
    "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
)  # fmt: skip
_FIELDS = {
    "Notification": _NOTIFICATION_FIELDS,
    "SubscriptionConfirmation": _CONFIRMATION_FIELDS,
    "UnsubscribeConfirmation": _CONFIRMATION_FIELDS,
}
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"1": hashes.SHA1, "2": hashes.SHA256}
_MAX_CACHED_CERTIFICATES = 64
_MAX_CERTIFICATE_BYTES = 64 * 1024
_FETCH_TIMEOUT_SECONDS = 10.0


def string_to_sign(message: Mapping[str, Any]) -> bytes:
    """The bytes SNS signs for this message (its ``Type`` picks the field list)."""
    fields = _FIELDS.get(str(message.get("Type")))
    if fields is None:
        raise Unauthenticated("not an SNS message type")
    parts = []
    for name in fields:
        value = message.get(name)
        if value is None and name == "Subject":
            continue  # the only optional field
        if not isinstance(value, str):
            raise Unauthenticated(f"SNS message without {name}")
        parts.append(f"{name}\n{value}\n")
    return "".join(parts).encode()


def is_sns_url(url: str, host_pattern: re.Pattern[str]) -> bool:
    """True for an ``https`` URL whose host matches the SNS host pattern."""
    parts = urlsplit(url)
    return parts.scheme == "https" and bool(host_pattern.fullmatch(parts.hostname or ""))


async def https_get(
    http: SharedHttp, url: str, *, ssl: ssl_module.SSLContext | None, what: str
) -> bytes:
    """GET an SNS URL through the shared pool; a failure is ours: ``AuthenticationUnavailable``."""
    try:
        async with http.session().get(
            url,
            allow_redirects=False,
            ssl=ssl if ssl is not None else True,
            timeout=client_timeout(_FETCH_TIMEOUT_SECONDS),
        ) as response:
            if response.status != 200:
                raise AuthenticationUnavailable(f"{what}: SNS answered {response.status}")
            return await read_capped(response, _MAX_CERTIFICATE_BYTES)
    except (aiohttp.ClientError, TimeoutError) as error:
        raise AuthenticationUnavailable(f"{what} failed: {type(error).__name__}") from error


class CertificateStore:
    """SNS signing certificates by URL: fetched over HTTPS from SNS hosts only, cached.

    ``ssl`` is the TLS context of those fetches (default: the system's trust store).
    """

    def __init__(
        self,
        http: SharedHttp,
        *,
        host_pattern: str = SNS_HOST_PATTERN,
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self._http = http
        self.host_pattern = re.compile(host_pattern)
        self.ssl = ssl
        self._keys: dict[str, tuple[rsa.RSAPublicKey, datetime]] = {}

    async def public_key(self, url: str, *, now: datetime) -> rsa.RSAPublicKey:
        """The RSA key of the certificate at ``url``; ``Unauthenticated`` for a foreign URL."""
        if not is_sns_url(url, self.host_pattern):
            raise Unauthenticated("SigningCertURL is not an SNS host over https")
        cached = self._keys.get(url)
        if cached is None:
            cached = await self._fetch(url)
            if len(self._keys) >= _MAX_CACHED_CERTIFICATES:
                self._keys.pop(next(iter(self._keys)))
            self._keys[url] = cached
        key, not_after = cached
        if now > not_after:
            raise Unauthenticated("the SNS signing certificate has expired")
        return key

    async def _fetch(self, url: str) -> tuple[rsa.RSAPublicKey, datetime]:
        pem = await https_get(self._http, url, ssl=self.ssl, what="SNS certificate fetch")
        try:
            certificate = x509.load_pem_x509_certificate(pem)
        except ValueError:
            raise Unauthenticated("SigningCertURL did not serve a PEM certificate") from None
        key = certificate.public_key()
        if not isinstance(key, rsa.RSAPublicKey):
            raise Unauthenticated("the SNS signing certificate has no RSA key")
        return key, certificate.not_valid_after_utc


class SnsPushFormat:
    """Verifies SNS signatures, confirms subscriptions of our topics, reads notifications."""

    name = "sns"

    def __init__(
        self,
        topic_arns: Collection[str],
        certificates: CertificateStore,
        http: SharedHttp,
        *,
        tolerance_seconds: float = 3900,
    ) -> None:
        if not topic_arns:
            raise ValueError("at least one SNS topic ARN is required")
        self._topics = frozenset(topic_arns)
        self._certificates = certificates
        self._http = http
        self._tolerance = tolerance_seconds

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless SNS signed this body for one of our topics."""
        message = _envelope(request.body)
        if message.get("TopicArn") not in self._topics:
            raise Unauthenticated("TopicArn is not a configured topic")
        signed = string_to_sign(message)
        algorithm = _HASHES.get(str(message.get("SignatureVersion")))
        if algorithm is None:
            raise Unauthenticated("unsupported SignatureVersion")
        _check_timestamp(message.get("Timestamp"), now, self._tolerance)
        key = await self._certificates.public_key(
            str(message.get("SigningCertURL", "")), now=datetime.fromtimestamp(now, UTC)
        )
        try:
            signature = base64.b64decode(str(message.get("Signature", "")), validate=True)
            key.verify(signature, signed, padding.PKCS1v15(), algorithm())
        except (InvalidSignature, binascii.Error, ValueError):
            raise Unauthenticated("SNS signature does not match") from None

    async def handle_control(self, request: PushRequest) -> str | None:
        """Confirm a subscription of our topic, note an unsubscribe; None for a notification.

        Called only after ``authenticate``: the topic is ours and SNS signed the URL.
        """
        message = _envelope(request.body)
        kind = message.get("Type")
        if kind == "Notification":
            return None
        if kind == "UnsubscribeConfirmation":
            log.warning("SNS unsubscribed this endpoint from %s", message.get("TopicArn"))
            return "unsubscribe confirmation noted"
        url = str(message.get("SubscribeURL", ""))
        if not is_sns_url(url, self._certificates.host_pattern):
            raise Unauthenticated("SubscribeURL is not an SNS host over https")
        await https_get(
            self._http, url, ssl=self._certificates.ssl, what="confirming the subscription"
        )
        log.info("confirmed the SNS subscription to %s", message.get("TopicArn"))
        return "subscription confirmed"

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """The notification's ``Message`` (our JSON payload) and ``MessageId``."""
        message = _envelope(request.body)
        message_id = message.get("MessageId")
        if not isinstance(message_id, str) or not message_id:
            raise MalformedDelivery("MessageId is missing")
        try:
            payload = orjson.loads(str(message.get("Message", "")))
        except orjson.JSONDecodeError:
            raise MalformedDelivery("the SNS Message is not JSON") from None
        return Delivery(queue=queue, message_id=message_id[:255], payload=payload)


def _envelope(body: bytes) -> dict[str, Any]:
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise Unauthenticated("body is not an SNS JSON message") from None
    if not isinstance(message, dict):
        raise Unauthenticated("body is not an SNS JSON message")
    return message


def _check_timestamp(raw: Any, now: float, tolerance: float) -> None:
    # SNS redelivers the original message (same Timestamp and Signature) for as long as its
    # delivery policy retries, so the tolerance must cover that policy's whole duration.
    try:
        stamp = datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise Unauthenticated("SNS Timestamp is not ISO 8601") from None
    if not now - tolerance <= stamp <= now + 300:
        raise Unauthenticated("SNS Timestamp outside tolerance")
