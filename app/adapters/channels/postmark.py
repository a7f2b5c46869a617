"""Email through Postmark's ``POST /email`` (``X-Postmark-Server-Token``).

Body ``{From, To, Subject, TextBody, HtmlBody, Headers: [{Name, Value}], MessageStream}``;
a 200 answers ``{"MessageID", "ErrorCode": 0, ...}`` and the ``MessageID`` becomes the send
record's ``provider_request_id`` (Postmark's events name the message by it).

Classification, from Postmark's API error documentation: 200 sent; 429 rate limited
(``Retry-After`` when given); 401 transient ``provider_auth`` (a wrong or rotated server
token is our configuration fault: the send waits for the fix, then redrive); 500 and 503
transient; 422 carries an ``ErrorCode``: 406 (inactive recipient: Postmark suppressed the
address after a hard bounce or complaint) and 300 (invalid request, e.g. a malformed
address) are permanent, as is any other 4xx.

Unknown outcome: Postmark has **no idempotency key**. A timeout or disconnect after the
request was sent (``unknown_outcome``) may have been accepted; a retry can deliver twice,
and failover to another provider is blocked for it (docs/deliverability.md).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult

from .http import HttpAnswer, SharedHttp, post_capped, raise_if_retryable
from .mime import require_email_recipient

DEFAULT_URL = "https://api.postmarkapp.com"


class PostmarkProvider:
    """Sends each rendered email with one ``POST /email``."""

    name = "postmark"

    def __init__(
        self,
        http: SharedHttp,
        *,
        server_token: SecretStr,
        sender: str,
        base_url: str = DEFAULT_URL,
        message_stream: str = "outbound",
    ) -> None:
        self.http = http
        self.url = f"{base_url.rstrip('/')}/email"
        self._token = server_token
        self.sender = sender
        self.message_stream = message_stream

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """POST the email; Postmark's ``MessageID`` on success, a classified error else."""
        require_email_recipient(message)
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "X-Postmark-Server-Token": self._token.get_secret_value(),
        }
        answer = await post_capped(
            self.http, self.url, data=json.dumps(self._body(message, idempotency_key)).encode(),
            headers=headers, timeout=timeout, what="Postmark",
        )  # fmt: skip
        return classify_postmark(answer)

    def _body(self, message: RenderedMessage, key: str) -> dict[str, Any]:
        headers = [{"Name": name, "Value": value} for name, value in message.headers.items()]
        body: dict[str, Any] = {
            "From": self.sender,
            "To": message.recipient,
            "Subject": message.subject,
            "TextBody": message.text,
            "MessageStream": self.message_stream,
            "Headers": headers,
            "Metadata": {"ledger_key": key[:80]},  # Postmark caps metadata values at 80
        }
        if message.html is not None:
            body["HtmlBody"] = message.html
        return body


def classify_postmark(answer: HttpAnswer) -> SendResult:
    """Postmark's answer as a send result or a classified provider error."""
    try:
        parsed = json.loads(answer.body)
    except ValueError:
        parsed = {}
    fields = parsed if isinstance(parsed, dict) else {}
    if answer.status == 200 and fields.get("ErrorCode", 0) == 0:
        message_id = fields.get("MessageID")
        return SendResult(provider_request_id=str(message_id) if message_id else None)
    code = fields.get("ErrorCode")
    text = f"Postmark answered {answer.status} (ErrorCode {code})"
    raise_if_retryable(answer, text=text, detail_prefix="provider")
    if answer.status == 401:
        raise TransientProviderError(text, detail_class="provider_auth")
    if code == 406:
        raise PermanentProviderError(text, detail_class="inactive_recipient")
    raise PermanentProviderError(text, detail_class="provider_rejected")
