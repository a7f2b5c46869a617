"""Email through an HTTP API shaped like Resend's ``POST /emails``.

Bearer key (``REMINDERS_EMAIL_API_KEY``), JSON body ``{from, to, subject, text, html, headers}``,
``Idempotency-Key`` = the ledger key, so a resend after a crash or an unknown outcome is
absorbed by the provider (Resend keeps keys for 24 hours). The answer's ``id`` becomes the
send record's ``provider_request_id``.

Classification: 2xx sent; 429 → rate limited (``Retry-After``); 401/403 → transient
``provider_auth`` (a rotated key is our configuration fault, not the customer's: the send
waits in retries and then the dead-letter set, ready to redrive once the key is fixed);
409 ``concurrent_idempotent_requests`` → transient; other 409 (same key, different payload)
→ permanent ``idempotency_conflict``; 408, 5xx, timeouts → transient; 400, 422 and other
4xx → permanent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult

from .http import HttpAnswer, SharedHttp, post_capped, raise_if_retryable
from .mime import require_email_recipient


class EmailApiProvider:
    """Sends rendered emails with one JSON POST per message."""

    name = "email_api"
    # A repeat with the same idempotency key is dropped by the provider (send_attempts).
    deduplicates = True

    def __init__(self, http: SharedHttp, *, base_url: str, api_key: SecretStr, sender: str) -> None:
        self.http = http
        self.url = f"{base_url.rstrip('/')}/emails"
        self._api_key = api_key
        self.sender = sender

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """POST the email; the provider's id on success, a classified error otherwise."""
        require_email_recipient(message)
        headers = {
            "Authorization": f"Bearer {self._api_key.get_secret_value()}",
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key,
        }
        answer = await post_capped(
            self.http,
            self.url,
            data=json.dumps(self._body(message)).encode(),
            headers=headers,
            timeout=timeout,
            what="email API",
        )
        return _classify(answer)

    def _body(self, message: RenderedMessage) -> dict[str, Any]:
        body: dict[str, Any] = {
            "from": self.sender,
            "to": [message.recipient],
            "subject": message.subject,
            "text": message.text,
        }
        if message.html is not None:
            body["html"] = message.html
        if message.headers:
            body["headers"] = dict(message.headers)
        return body


def _error_name(raw: bytes) -> str:
    """The provider's error name (e.g. ``validation_error``), never its free text."""
    try:
        name = json.loads(raw).get("name")
    except (ValueError, AttributeError):
        return "unknown"
    return name[:64] if isinstance(name, str) else "unknown"


def _classify(answer: HttpAnswer) -> SendResult:
    status = answer.status
    if 200 <= status < 300:
        try:
            provider_id = json.loads(answer.body).get("id")
        except (ValueError, AttributeError):
            provider_id = None
        return SendResult(provider_request_id=str(provider_id)[:255] if provider_id else None)
    name = _error_name(answer.body)
    text = f"email API answered {status} ({name})"
    raise_if_retryable(answer, text=text, detail_prefix="provider")
    if status in (401, 403):
        raise TransientProviderError(text, detail_class="provider_auth")
    if status == 409:
        if name == "concurrent_idempotent_requests":
            raise TransientProviderError(text, detail_class="idempotency_in_progress")
        raise PermanentProviderError(text, detail_class="idempotency_conflict")
    raise PermanentProviderError(text, detail_class="provider_rejected")
