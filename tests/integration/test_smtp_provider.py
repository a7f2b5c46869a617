"""The SMTP provider against a real aiosmtpd server in the test process."""

from __future__ import annotations

import socket

import pytest
from pydantic import SecretStr

from app.adapters.channels.mime import message_id_for
from app.adapters.channels.smtp import SmtpProvider
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage
from tests.support.channel_servers import TlsMaterial, free_port, smtp_server

pytestmark = pytest.mark.anyio

KEY = "digest:cust_1:2026-W33:email:smtp"
SENDER = "Reminders <reminders@relay.example>"


def email(**overrides: object) -> RenderedMessage:
    """A rendered email with one-click unsubscribe headers, as the renderer makes them."""
    values: dict = {
        "channel": "email",
        "recipient": "ada@example.com",
        "subject": "Your weekly digest",
        "text": "Hello Ada\n.\nA line that starts with a dot.\n",
        "html": "<p>Hello <b>Ada</b></p>",
        "headers": {
            "List-Unsubscribe": "<https://relay.example/unsubscribe/tok>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
    }
    values.update(overrides)
    return RenderedMessage(**values)


def provider_for(server, **overrides: object) -> SmtpProvider:
    """A provider pointed at the local server (plain SMTP unless told otherwise)."""
    values: dict = {"host": server.host, "port": server.port, "sender": SENDER, "security": "none"}
    values.update(overrides)
    return SmtpProvider(**values)


async def test_delivers_with_stable_message_id_and_unsubscribe_headers():
    """An accepted email carries the ledger key's Message-ID and RFC 8058 headers, intact."""
    with smtp_server() as server:
        result = await provider_for(server).send(email(), idempotency_key=KEY, timeout=5)
        await provider_for(server).send(email(), idempotency_key=KEY, timeout=5)
    first, second = server.handler.messages
    assert (
        first["Message-ID"] == second["Message-ID"] == message_id_for(KEY, domain="relay.example")
    )
    assert first["List-Unsubscribe"] == "<https://relay.example/unsubscribe/tok>"
    assert first["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert server.handler.envelopes[0] == ("reminders@relay.example", ["ada@example.com"])
    text = first.get_body(("plain",)).get_content()
    assert ".\nA line that starts with a dot." in text.replace("\r\n", "\n")
    assert result.provider_request_id is not None and "queued as Q1" in result.provider_request_id


async def test_starttls_with_auth_delivers():
    """STARTTLS (certificate checked against our CA) then AUTH, then the message goes out."""
    tls = TlsMaterial()
    with smtp_server(security="starttls", tls=tls, credentials=("relay", "s3cret-pw")) as server:
        provider = provider_for(
            server,
            security="starttls",
            username="relay",
            password=SecretStr("s3cret-pw"),
            tls_context=tls.client_context(),
        )
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert len(server.handler.messages) == 1


async def test_implicit_tls_delivers():
    """Implicit TLS (SMTPS) works with a CA-verified certificate."""
    tls = TlsMaterial()
    with smtp_server(security="tls", tls=tls) as server:
        provider = provider_for(server, security="tls", tls_context=tls.client_context())
        await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert len(server.handler.messages) == 1


async def test_untrusted_certificate_is_transient_tls_error():
    """A certificate our CA bundle does not trust is refused: transient, nothing sent."""
    with smtp_server(security="starttls", tls=TlsMaterial()) as server:
        provider = provider_for(
            server, security="starttls", tls_context=TlsMaterial().client_context()
        )
        with pytest.raises(TransientProviderError) as caught:
            await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "smtp_tls"
    assert server.handler.messages == []


async def test_wrong_password_is_transient_auth_error():
    """Failed AUTH is our configuration, not the message: transient ``smtp_auth``."""
    tls = TlsMaterial()
    with smtp_server(security="starttls", tls=tls, credentials=("relay", "right")) as server:
        provider = provider_for(
            server,
            security="starttls",
            username="relay",
            password=SecretStr("wrong"),
            tls_context=tls.client_context(),
        )
        with pytest.raises(TransientProviderError) as caught:
            await provider.send(email(), idempotency_key=KEY, timeout=5)
    assert caught.value.detail_class == "smtp_auth"


@pytest.mark.parametrize(
    ("reply", "expected", "detail_class"),
    [
        ("421", TransientProviderError, "smtp_4xx"),
        ("450", TransientProviderError, "smtp_4xx"),
        ("550", PermanentProviderError, "smtp_rcpt_5xx"),  # at RCPT TO: suppresses
    ],
)
async def test_reply_codes_are_classified(reply, expected, detail_class):
    """4xx replies are transient, 5xx replies permanent, and the code is in the message."""
    with smtp_server() as server:
        server.handler.mode = reply
        with pytest.raises(expected) as caught:
            await provider_for(server).send(email(), idempotency_key=KEY, timeout=5)
    assert type(caught.value) is expected
    assert caught.value.detail_class == detail_class
    assert f"SMTP {reply}" in str(caught.value)


async def test_hang_during_data_is_unknown_outcome():
    """No answer to the message data: the server may have queued it → ``unknown_outcome``."""
    with smtp_server() as server:
        server.handler.mode = "hang"
        with pytest.raises(TransientProviderError) as caught:
            await provider_for(server).send(email(), idempotency_key=KEY, timeout=0.5)
    assert caught.value.detail_class == "unknown_outcome"


async def test_hang_before_data_is_plain_timeout():
    """A server stuck before DATA cannot have the message: transient ``smtp_timeout``."""
    with smtp_server() as server:
        server.handler.mode = "hang_rcpt"
        with pytest.raises(TransientProviderError) as caught:
            await provider_for(server).send(email(), idempotency_key=KEY, timeout=0.5)
    assert caught.value.detail_class == "smtp_timeout"


async def test_silent_server_times_out_at_connect():
    """A listener that never greets: transient timeout during connect, within the deadline."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        provider = SmtpProvider(host="127.0.0.1", port=port, sender=SENDER, security="none")
        with pytest.raises(TransientProviderError) as caught:
            await provider.send(email(), idempotency_key=KEY, timeout=0.5)
    assert caught.value.detail_class == "smtp_timeout"


async def test_refused_connection_is_transient():
    """Nobody listening: transient ``smtp_connect_error``."""
    provider = SmtpProvider(host="127.0.0.1", port=free_port(), sender=SENDER, security="none")
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(email(), idempotency_key=KEY, timeout=2)
    assert caught.value.detail_class == "smtp_connect_error"


async def test_missing_address_is_permanent():
    """A customer without an email address can never be sent to."""
    provider = SmtpProvider(host="127.0.0.1", port=free_port(), sender=SENDER)
    with pytest.raises(PermanentProviderError):
        await provider.send(email(recipient=""), idempotency_key=KEY, timeout=2)


async def test_a_long_unsubscribe_url_crosses_the_wire_unencoded():
    """The SMTP DATA carries the 100-character one-click URL literally (RFC 2369/8058)."""
    url = "https://reminders.example-company.com/unsubscribe/Y3VzdF8xODQyCmVtYWls.q9xZ2pLwY1"
    url += "x" * (100 - len(url))
    headers = {
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }
    with smtp_server() as server:
        await provider_for(server).send(email(headers=headers), idempotency_key=KEY, timeout=5)
    raw = server.handler.raw[0]
    assert len(url) == 100
    assert f"\r\nList-Unsubscribe: <{url}>\r\n".encode() in raw
    assert b"\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in raw
    assert server.handler.messages[0]["List-Unsubscribe"] == f"<{url}>"


async def test_an_internationalised_domain_goes_out_in_idna_form():
    """``a@bücher.de`` is sent to ``a@xn--bcher-kva.de`` (envelope and To) by any server."""
    with smtp_server() as server:
        await provider_for(server).send(
            email(recipient="a@bücher.de"), idempotency_key=KEY, timeout=5
        )
    assert server.handler.envelopes == [("reminders@relay.example", ["a@xn--bcher-kva.de"])]
    assert server.handler.messages[0]["To"] == "a@xn--bcher-kva.de"


async def test_a_unicode_local_part_uses_smtputf8_when_the_server_offers_it():
    """``ü@bücher.de`` travels with SMTPUTF8: envelope and To header in UTF-8."""
    with smtp_server(smtputf8=True) as server:
        await provider_for(server).send(
            email(recipient="ü@bücher.de"), idempotency_key=KEY, timeout=5
        )
    assert server.handler.envelopes == [("reminders@relay.example", ["ü@xn--bcher-kva.de"])]
    assert server.handler.messages[0]["To"] == "ü@bücher.de"
    assert b"To: \xc3\xbc@b\xc3\xbccher.de" in server.handler.raw[0]


async def test_a_unicode_local_part_without_smtputf8_fails_permanently_unsent():
    """A server without SMTPUTF8 can never take ``ü@example.com``: permanent
    ``recipient_unsupported``, before anything is sent (no retries, no traceback)."""
    with smtp_server() as server, pytest.raises(PermanentProviderError) as caught:
        await provider_for(server).send(
            email(recipient="ü@example.com"), idempotency_key=KEY, timeout=5
        )
    assert caught.value.detail_class == "recipient_unsupported"
    assert server.handler.messages == []


async def test_a_domain_idna_cannot_write_fails_permanently():
    """A domain that is no valid internationalised name is ``recipient_unsupported``."""
    provider = SmtpProvider(host="127.0.0.1", port=free_port(), sender=SENDER, security="none")
    with pytest.raises(PermanentProviderError) as caught:
        await provider.send(email(recipient="a@bü_cher.de"), idempotency_key=KEY, timeout=2)
    assert caught.value.detail_class == "recipient_unsupported"
