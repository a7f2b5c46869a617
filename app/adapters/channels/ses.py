"""Email through Amazon SES v2 ``SendEmail`` (aiobotocore, the ``[aws]`` extra).

The message goes as ``Content.Raw``: the same MIME the SMTP provider sends (``mime.py``),
so ``List-Unsubscribe`` and the ``Message-ID`` derived from the ledger key travel with it.
``ConfigurationSetName`` (``REMINDERS_SES_CONFIGURATION_SET``) names the configuration set
whose event destinations publish bounces, complaints and deliveries (docs/deliverability.md).
SES's ``MessageId`` is stored as ``provider_request_id``; its notifications name it in
``mail.messageId``. aiobotocore is imported when the first email is sent.

Classification, from the SES v2 API reference: ``ThrottlingException`` (sending rate or
daily quota exceeded, answered with HTTP 400), ``TooManyRequestsException``,
``LimitExceededException`` and ``Throttling`` are rate limited (SES sends no Retry-After: the
retry policy's backoff sets the delay); ``SendingPausedException``,
``AccountSuspendedException``, ``MailFromDomainNotVerifiedException`` and ``NotFoundException``
(a missing configuration set) are our account's or configuration's state: transient
``provider_account``, waiting for a fix; other 5xx transient; ``MessageRejected`` and
``BadRequestException`` (and other 4xx) permanent.

Unknown outcome: ``SendEmail`` takes **no idempotency key**. botocore's own retries are off
(``total_max_attempts`` 1): a retry after a read timeout could send twice behind our back. A read
timeout or dropped connection after the request was sent is ``unknown_outcome``.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any

from app.domain.clock import utc_now
from app.domain.errors import (
    ConfigError,
    PermanentProviderError,
    ProviderError,
    RateLimitedError,
    TransientProviderError,
)
from app.domain.messages import RenderedMessage, SendResult

from .mime import SMTP_POLICY, build_email, require_email_recipient

# ThrottlingException is what SES v2 answers past the sending rate or the daily quota (its
# quota docs); "Throttling" is the same refusal's name in the v1 Query API.
_THROTTLED = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "LimitExceededException", "Throttling"}
)
_ACCOUNT = frozenset(
    {
        "SendingPausedException",
        "AccountSuspendedException",
        "MailFromDomainNotVerifiedException",
        "NotFoundException",
    }
)


class SesProvider:
    """Sends each rendered email with one SES v2 ``SendEmail``."""

    name = "ses"

    def __init__(
        self,
        *,
        sender: str,
        region: str | None = None,
        endpoint_url: str | None = None,
        configuration_set: str = "",
    ) -> None:
        self.sender = sender
        self.configuration_set = configuration_set
        self._options = {"region_name": region, "endpoint_url": endpoint_url}
        self._client: Any = None
        self._stack = AsyncExitStack()
        self._lock = asyncio.Lock()

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """``SendEmail`` with the raw MIME; SES's ``MessageId`` or a classified error."""
        require_email_recipient(message)
        raw = build_email(
            message, idempotency_key=idempotency_key, sender=self.sender, now=utc_now()
        )
        request: dict[str, Any] = {
            "FromEmailAddress": self.sender,
            "Destination": {"ToAddresses": [message.recipient]},
            "Content": {"Raw": {"Data": raw.as_bytes(policy=SMTP_POLICY)}},
        }
        if self.configuration_set:
            request["ConfigurationSetName"] = self.configuration_set
        client = await self._ensure_client(timeout)
        try:
            async with asyncio.timeout(timeout):
                answer = await client.send_email(**request)
        except Exception as error:
            raise classify_ses_error(error) from error
        return SendResult(provider_request_id=answer.get("MessageId"))

    async def _ensure_client(self, timeout: float) -> Any:
        async with self._lock:
            if self._client is None:
                try:
                    from aiobotocore.config import AioConfig
                    from aiobotocore.session import get_session
                except ImportError as error:  # the default install has no AWS SDK
                    raise ConfigError(
                        "REMINDERS_EMAIL_PROVIDER=ses needs: pip install 'reminder-relay[aws]'"
                    ) from error
                config = AioConfig(
                    # total_max_attempts counts the first request: 1 means no retry at all.
                    # (botocore's max_attempts counts retries: 1 there would resend once.)
                    retries={"total_max_attempts": 1, "mode": "standard"},
                    connect_timeout=timeout / 2,
                    read_timeout=timeout,
                )
                options = {k: v for k, v in self._options.items() if v is not None}
                self._client = await self._stack.enter_async_context(
                    get_session().create_client("sesv2", config=config, **options)
                )
        return self._client

    async def aclose(self) -> None:
        """Close the SES client's connections."""
        await self._stack.aclose()
        self._client = None


def classify_ses_error(error: BaseException) -> ProviderError:
    """A botocore failure as a transient, rate-limited or permanent provider error."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
    )

    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        text = f"SES answered {status} {code}"
        if code in _THROTTLED or status == 429:
            return RateLimitedError(text, detail_class="rate_limited")
        if code in _ACCOUNT:
            return TransientProviderError(text, detail_class="provider_account")
        if status >= 500:
            return TransientProviderError(text, detail_class="provider_5xx")
        return PermanentProviderError(text, detail_class="provider_rejected")
    if isinstance(error, EndpointConnectionError | ConnectTimeoutError):
        return TransientProviderError("SES: cannot connect", detail_class="connect_error")
    if isinstance(error, TimeoutError | ConnectionClosedError) or "Timeout" in type(error).__name__:
        return TransientProviderError(
            "SES: no answer after the request was sent; it may have been accepted",
            detail_class="unknown_outcome",
        )
    return TransientProviderError(
        f"SES call failed: {type(error).__name__}", detail_class="unknown_outcome"
    )
