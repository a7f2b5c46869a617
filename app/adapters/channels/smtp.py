"""Email over SMTP with aiosmtplib: one connection per send, STARTTLS or implicit TLS, AUTH.

The message is the shared MIME form (``mime.build_email``): its ``Message-ID`` derives from
the ledger key, so a retry after an unknown outcome re-sends the *same* message id, which
many receiving systems deduplicate on — but plain SMTP has no idempotency key, so such a
retry can still deliver twice (see the README). ``List-Unsubscribe`` headers come from the
renderer.

Classification: connection errors, timeouts and 4xx replies → transient; 5xx replies to the
envelope or the data (bad mailbox, rejected message) → permanent, and a 5xx to ``RCPT TO``
is told apart (``smtp_rcpt_5xx``) because it suppresses the address. Two 5xx cases are our
configuration, not the message, and stay transient so the send waits for a fix: a server
that refuses the connection (``smtp_connect_refused``) and failed AUTH (``smtp_auth``).
A timeout or disconnect during DATA is ``unknown_outcome``: the server may have queued it.

Addresses (``app/domain/addresses.py``): the domain goes out in IDNA ASCII form; a local part
that is not ASCII is sent with SMTPUTF8 when the server offers it, and is otherwise a
permanent ``recipient_unsupported`` (before MAIL FROM: nothing was sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import Callable
from datetime import datetime
from email.utils import parseaddr
from typing import Literal

import aiosmtplib
from pydantic import SecretStr

from app.domain.addresses import UNSUPPORTED, SmtpAddress, smtp_address
from app.domain.clock import utc_now
from app.domain.errors import PermanentProviderError, ProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult

from .mime import SMTP_POLICY, SMTPUTF8_POLICY, build_email, require_email_recipient

Security = Literal["starttls", "tls", "none"]
Phase = Literal["connect", "auth", "envelope", "recipient", "data"]
# A 5xx answer to RCPT TO: the receiving system refuses this mailbox. Permanent, and the
# receiver puts the address on the suppression list (app/domain/suppression.py).
RECIPIENT_REFUSED = "smtp_rcpt_5xx"
QUIT_TIMEOUT_SECONDS = 2.0


class SmtpProvider:
    """Sends each rendered email in its own SMTP session."""

    name = "smtp"

    def __init__(
        self,
        *,
        host: str,
        port: int,
        sender: str,
        security: Security = "starttls",
        username: str | None = None,
        password: SecretStr | None = None,
        tls_context: ssl.SSLContext | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.host = host
        self.port = port
        self.sender = sender
        self.security = security
        self.username = username
        self._password = password
        self.tls_context = tls_context
        self.clock = clock  # the email's Date header

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """Deliver through the SMTP server; the server's queue reply is the request id."""
        require_email_recipient(message)
        address = smtp_address(message.recipient)
        client = aiosmtplib.SMTP(
            hostname=self.host,
            port=self.port,
            timeout=timeout,
            use_tls=self.security == "tls",
            start_tls=self.security == "starttls",
            tls_context=self.tls_context,
        )
        phase: list[Phase] = ["connect"]
        try:
            async with asyncio.timeout(timeout):
                reply = await self._converse(client, phase, message, address, idempotency_key)
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
            client.close()
            raise classify_smtp_error(error, phase[0]) from error
        except ProviderError:
            client.close()
            raise
        # The message is accepted: a slow or failing QUIT changes nothing.
        with contextlib.suppress(aiosmtplib.SMTPException, OSError, TimeoutError):
            await client.quit(timeout=QUIT_TIMEOUT_SECONDS)
        client.close()
        return SendResult(provider_request_id=reply[:255] or None)

    async def _converse(
        self,
        client: aiosmtplib.SMTP,
        phase: list[Phase],
        message: RenderedMessage,
        address: SmtpAddress,
        idempotency_key: str,
    ) -> str:
        await client.connect()
        if self.username:
            phase[0] = "auth"
            password = self._password.get_secret_value() if self._password else ""
            await client.login(self.username, password)
        phase[0] = "envelope"
        utf8 = await self._smtputf8(client, address)
        options, encoding = (["SMTPUTF8"], "utf-8") if utf8 else ([], "ascii")
        await client.mail(parseaddr(self.sender)[1] or self.sender, options=options)
        phase[0] = "recipient"
        await client.rcpt(address.envelope, encoding=encoding)
        phase[0] = "data"
        response = await client.data(self._content(message, address, idempotency_key, utf8))
        return response.message

    async def _smtputf8(self, client: aiosmtplib.SMTP, address: SmtpAddress) -> bool:
        """Whether this send needs SMTPUTF8; refused permanently when the server lacks it."""
        if not address.needs_smtputf8:
            return False
        if client.is_ehlo_or_helo_needed:
            await client.ehlo()
        if not client.supports_extension("smtputf8"):
            raise PermanentProviderError(
                f"{address.envelope!r} needs SMTPUTF8, which {self.host} does not offer",
                detail_class=UNSUPPORTED,
            )
        return True

    def _content(
        self, message: RenderedMessage, address: SmtpAddress, key: str, utf8: bool
    ) -> bytes:
        # Without SMTPUTF8 the To header carries the ASCII form (an encoded word is no address).
        shown = message if utf8 else dataclasses.replace(message, recipient=address.envelope)
        raw = build_email(shown, idempotency_key=key, sender=self.sender, now=self.clock())
        return raw.as_bytes(policy=SMTPUTF8_POLICY if utf8 else SMTP_POLICY)


def classify_smtp_error(error: BaseException, phase: Phase) -> ProviderError:
    """An aiosmtplib/OS failure in ``phase`` as a transient or permanent provider error."""
    if isinstance(error, aiosmtplib.SMTPResponseException):
        return _classify_reply(error.code, error.message, phase)
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused) and error.recipients:
        first = error.recipients[0]
        return _classify_reply(first.code, first.message, phase)
    if phase == "data" and isinstance(error, TimeoutError | aiosmtplib.SMTPServerDisconnected):
        return TransientProviderError(
            "SMTP server did not confirm the message; it may have been accepted",
            detail_class="unknown_outcome",
        )
    if isinstance(error, TimeoutError):
        return TransientProviderError(f"SMTP timed out during {phase}", detail_class="smtp_timeout")
    if isinstance(error, ssl.SSLError | aiosmtplib.SMTPNotSupported):
        return TransientProviderError(
            f"SMTP TLS failed during {phase}: {type(error).__name__}", detail_class="smtp_tls"
        )
    return TransientProviderError(
        f"SMTP connection failed during {phase}: {type(error).__name__}",
        detail_class="smtp_connect_error" if phase == "connect" else "smtp_disconnected",
    )


def _classify_reply(code: int, text: str, phase: Phase) -> ProviderError:
    summary = f"SMTP {code} during {phase}: {' '.join(text.split())[:200]}"
    if phase == "auth":
        return TransientProviderError(summary, detail_class="smtp_auth")
    if 400 <= code < 500:
        return TransientProviderError(summary, detail_class="smtp_4xx")
    if phase == "connect":
        return TransientProviderError(summary, detail_class="smtp_connect_refused")
    if phase == "recipient":
        return PermanentProviderError(summary, detail_class=RECIPIENT_REFUSED)
    return PermanentProviderError(summary, detail_class="smtp_5xx")
