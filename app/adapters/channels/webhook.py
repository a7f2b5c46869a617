"""Webhooks: POST the reminder as JSON to the customer's ``webhook_url``, Standard Webhooks signed.

Headers: ``webhook-id`` is the ledger key (stable across attempts, so receivers deduplicate a
resend after a crash or an unknown outcome), ``webhook-timestamp`` the send time,
``webhook-signature`` ``v1,<base64 HMAC-SHA256>`` from the ``standardwebhooks`` library under
``REMINDERS_WEBHOOK_SIGNING_SECRET``. Targets pass the SSRF guard (``ssrf.py``); redirects are
not followed. Classification: 2xx sent; 410 → ``WebhookGone`` (permanent, the receiver disables
the customer's webhook channel); 429 → rate limited; 408, 5xx, timeouts → transient; 3xx and
other 4xx → permanent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import datetime

from pydantic import SecretStr
from standardwebhooks.webhooks import Webhook

from app.domain.clock import utc_now
from app.domain.errors import PermanentProviderError, TransientProviderError, WebhookGone
from app.domain.messages import RenderedMessage, SendResult

from .http import HttpAnswer, SharedHttp, post_capped, raise_if_retryable
from .ssrf import (
    Resolver,
    TargetCheck,
    TargetPolicy,
    VettedTarget,
    system_resolver,
    vet_target,
)


class WebhookProvider:
    """Signed JSON POSTs to customer endpoints, through the shared HTTP client."""

    name = "webhook"

    def __init__(
        self,
        http: SharedHttp,
        *,
        signing_secret: SecretStr,
        policy: TargetPolicy,
        resolver: Resolver = system_resolver,
        clock: Callable[[], datetime] = utc_now,
        user_agent: str = "reminder-relay-webhooks/1",
    ) -> None:
        self.http = http
        self._signer = Webhook(signing_secret.get_secret_value())
        self.policy = policy
        self.resolver = resolver
        self.clock = clock
        self.user_agent = user_agent

    @property
    def target_check(self) -> TargetCheck:
        """The guard this provider sends through, for refusing targets at registration."""
        return TargetCheck(self.policy, self.resolver)

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """POST the signed body to the vetted target and classify the answer."""
        if not message.recipient:
            raise PermanentProviderError("customer has no webhook_url", detail_class="no_recipient")
        deadline = time.monotonic() + timeout
        target = await self._vet(message.recipient, timeout)
        body = json.dumps(message.body or {}, separators=(",", ":"), sort_keys=True)
        headers = self._headers(target, idempotency_key, body)
        answer = await post_capped(
            self.http,
            str(target.connect_url),
            data=body.encode(),
            headers=headers,
            timeout=max(0.01, deadline - time.monotonic()),
            what="webhook",
            server_hostname=target.tls_server_name,
        )
        result = _classify(answer)
        # Receivers rarely send a request id; then the webhook-id is the ledger's reference.
        return result if result.provider_request_id else SendResult(idempotency_key[:255])

    async def _vet(self, url: str, timeout: float) -> VettedTarget:
        # DNS is part of the send's time budget; a resolver that hangs is a transient failure.
        try:
            async with asyncio.timeout(timeout):
                return await vet_target(url, self.policy, self.resolver)
        except TimeoutError as error:
            raise TransientProviderError(
                "resolving the webhook host timed out", detail_class="dns_error"
            ) from error

    def _headers(self, target: VettedTarget, msg_id: str, body: str) -> dict[str, str]:
        timestamp = self.clock()
        return {
            "Host": target.host_header,
            "Content-Type": "application/json",
            "User-Agent": self.user_agent,
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": self._signer.sign(msg_id, timestamp, body),
        }


def _classify(answer: HttpAnswer) -> SendResult:
    status = answer.status
    if 200 <= status < 300:
        return SendResult(provider_request_id=answer.headers.get("x-request-id"))
    if status == 410:
        raise WebhookGone("webhook endpoint answered 410 Gone")
    raise_if_retryable(answer, text=f"webhook endpoint answered {status}", detail_prefix="webhook")
    if 300 <= status < 400:
        raise PermanentProviderError(
            f"webhook endpoint redirected ({status}); redirects are not followed",
            detail_class="redirect_refused",
        )
    raise PermanentProviderError(f"webhook endpoint answered {status}", detail_class="webhook_4xx")
