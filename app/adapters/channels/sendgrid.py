"""Email through SendGrid's ``POST /v3/mail/send`` (``Authorization: Bearer <API key>``).

Body ``{personalizations: [{to: [{email}]}], from: {email}, subject, content: [...],
headers, custom_args}``; SendGrid answers **202 Accepted** with an empty body and the
message's id in the ``X-Message-Id`` header, stored as ``provider_request_id`` (its events
carry it as the head of ``sg_message_id``).

Classification, from SendGrid's v3 error documentation: 202 sent; 429 rate limited (until
``X-RateLimit-Reset``, Unix seconds, or ``Retry-After``); 401 and 403 transient
``provider_auth`` (a revoked key or missing permission is our configuration fault); 408 and
5xx transient; 400 (a field is wrong, e.g. the address), 413 (too large) and other 4xx
permanent.

Unknown outcome: ``/v3/mail/send`` takes **no idempotency key**. A timeout or disconnect
after the request was sent may have been accepted; a retry can deliver twice, and failover
is blocked for it (docs/deliverability.md).
"""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import SecretStr

from app.domain.errors import PermanentProviderError, RateLimitedError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult

from .http import HttpAnswer, SharedHttp, post_capped, raise_if_retryable, retry_after_seconds
from .mime import require_email_recipient

DEFAULT_URL = "https://api.sendgrid.com"


class SendGridProvider:
    """Sends each rendered email with one ``POST /v3/mail/send``."""

    name = "sendgrid"

    def __init__(
        self, http: SharedHttp, *, api_key: SecretStr, sender: str, base_url: str = DEFAULT_URL
    ) -> None:
        self.http = http
        self.url = f"{base_url.rstrip('/')}/v3/mail/send"
        self._key = api_key
        self.sender = sender

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """POST the email; SendGrid's ``X-Message-Id`` on success, a classified error else."""
        require_email_recipient(message)
        headers = {
            "Authorization": f"Bearer {self._key.get_secret_value()}",
            "Content-Type": "application/json",
        }
        answer = await post_capped(
            self.http, self.url, data=json.dumps(self._body(message, idempotency_key)).encode(),
            headers=headers, timeout=timeout, what="SendGrid",
        )  # fmt: skip
        return classify_sendgrid(answer, now=time.time())

    def _body(self, message: RenderedMessage, key: str) -> dict[str, Any]:
        content = [{"type": "text/plain", "value": message.text}]
        if message.html is not None:
            content.append({"type": "text/html", "value": message.html})
        body: dict[str, Any] = {
            "personalizations": [{"to": [{"email": message.recipient}]}],
            "from": {"email": self.sender},
            "subject": message.subject,
            "content": content,
            "custom_args": {"ledger_key": key},
        }
        if message.headers:
            body["headers"] = dict(message.headers)
        return body


def classify_sendgrid(answer: HttpAnswer, *, now: float) -> SendResult:
    """SendGrid's answer as a send result or a classified provider error."""
    if 200 <= answer.status < 300:
        return SendResult(provider_request_id=answer.headers.get("x-message-id") or None)
    text = f"SendGrid answered {answer.status} ({_first_error(answer.body)})"
    if answer.status == 429:
        raise RateLimitedError(
            text, retry_after=_reset_in(answer, now), detail_class="rate_limited"
        )
    raise_if_retryable(answer, text=text, detail_prefix="provider")
    if answer.status in (401, 403):
        raise TransientProviderError(text, detail_class="provider_auth")
    raise PermanentProviderError(text, detail_class="provider_rejected")


def _reset_in(answer: HttpAnswer, now: float) -> float | None:
    reset = answer.headers.get("x-ratelimit-reset", "")
    if reset.isdigit():
        return max(1.0, int(reset) - now)
    return retry_after_seconds(answer.headers.get("retry-after"))


def _first_error(raw: bytes) -> str:
    """The first error's field name (never the free text, which may quote the address)."""
    try:
        errors = json.loads(raw).get("errors") or []
        field = errors[0].get("field") if errors and isinstance(errors[0], dict) else None
    except (ValueError, AttributeError):
        return "unknown"
    return f"field {str(field)[:64]}" if field else "unknown"
