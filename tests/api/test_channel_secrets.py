"""Failing sends through the real providers leave no secret in logs, answers or the ledger."""

from __future__ import annotations

import base64
import logging
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from app.container import build_container
from app.main import create_app
from tests.conftest import REAL_MAIL, make_settings
from tests.support.channel_servers import FakeEmailApi, TlsMaterial, WebhookSink, serve, smtp_server
from tests.support.flow import get_reminder, push_message, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio

SMTP_PASSWORD = "Sm7p-pa55w0rd-do-not-log"
API_KEY = "re_live_key_do_not_log_123"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"webhook-secret-do-not-log").decode()


def forms_of(secret: str) -> list[str]:
    """The secret and the encodings a careless log line could carry it in."""
    raw = secret.encode()
    return [
        secret,
        base64.b64encode(raw).decode(),
        base64.b64encode(b"\0relay\0" + raw).decode(),  # SMTP AUTH PLAIN
        raw.hex(),
    ]


@asynccontextmanager
async def service(database_url, tmp_path: Path, clock, rand, publisher, **overrides):
    """The whole service with the given provider settings; yields an HTTP client."""
    settings = make_settings(database_url, tmp_path, **overrides)
    container = build_container(settings, clock=clock, rand=rand, publisher=publisher)
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client
    finally:
        await container.http.aclose()
        await container.engine.dispose()


async def fail_once(client, publisher, clock, channel: str, **customer) -> tuple[dict, dict]:
    """Register, sweep and push one reminder; its answer and send record."""
    await put_customer(client, "cust_s", **customer)
    await put_reminder(
        client, "r:secret", customer_id="cust_s", due_at=clock.now, channels=(channel,)
    )
    await sweep(client)
    [message] = publisher.drain()
    answer = (await push_message(client, message)).json()
    record = (await get_reminder(client, "r:secret"))["send_records"][0]
    return answer, record


def assert_nowhere(secret: str, caplog, answer: dict, record: dict) -> None:
    """None of the secret's forms is in the captured logs, the answer or the record."""
    haystack = caplog.text + repr(answer) + repr(record)
    for form in forms_of(secret):
        assert form not in haystack


async def test_smtp_auth_failure_logs_no_password(
    clean_database_url, tmp_path, clock, rand, publisher, caplog
):
    """Rejected SMTP AUTH: retried as ``smtp_auth``, the password appears nowhere."""
    caplog.set_level(logging.DEBUG)
    tls = TlsMaterial()
    ca_file = tmp_path / "ca.pem"
    tls.ca.cert_pem.write_to_path(str(ca_file))
    with smtp_server(security="starttls", tls=tls, credentials=("relay", "other")) as server:
        async with service(
            clean_database_url,
            tmp_path,
            clock,
            rand,
            publisher,
            email_provider="smtp",
            **REAL_MAIL,
            unsubscribe_secret=SecretStr("test-unsubscribe-secret-7c1e9a3f5b2d8046"),
            smtp_host=server.host,
            smtp_port=server.port,
            smtp_security="starttls",
            smtp_username="relay",
            smtp_password=SecretStr(SMTP_PASSWORD),
            smtp_ca_file=ca_file,
        ) as client:
            answer, record = await fail_once(client, publisher, clock, "email")
    assert answer["outcome"] == "retry"
    assert record["last_error_class"] == "smtp_auth"
    assert_nowhere(SMTP_PASSWORD, caplog, answer, record)


async def test_email_api_auth_failure_logs_no_key(
    clean_database_url, tmp_path, clock, rand, publisher, caplog
):
    """A key the provider refuses: retried as ``provider_auth``, the key appears nowhere."""
    caplog.set_level(logging.DEBUG)
    fake = FakeEmailApi(api_key="re_the_current_key")
    async with (
        serve(fake.app()) as base_url,
        service(
            clean_database_url,
            tmp_path,
            clock,
            rand,
            publisher,
            email_provider="email_api",
            **REAL_MAIL,
            email_api_url=base_url,
            email_api_key=SecretStr(API_KEY),
            unsubscribe_secret=SecretStr("test-unsubscribe-secret-7c1e9a3f5b2d8046"),
        ) as client,
    ):
        answer, record = await fail_once(client, publisher, clock, "email")
    assert answer["outcome"] == "retry"
    assert record["last_error_class"] == "provider_auth"
    assert_nowhere(API_KEY, caplog, answer, record)


async def test_webhook_failure_logs_no_signing_secret(
    clean_database_url, tmp_path, clock, rand, publisher, caplog
):
    """A 500 from the endpoint: retried as ``webhook_5xx``, the signing secret appears nowhere."""
    caplog.set_level(logging.DEBUG)
    sink = WebhookSink(script=[(500, {})])
    async with (
        serve(sink.app()) as base_url,
        service(
            clean_database_url,
            tmp_path,
            clock,
            rand,
            publisher,
            webhook_provider="webhook",
            webhook_signing_secret=SecretStr(WEBHOOK_SECRET),
            webhook_allowed_targets=["127.0.0.0/8"],
        ) as client,
    ):
        answer, record = await fail_once(
            client, publisher, clock, "webhook", webhook_url=f"{base_url}/hook"
        )
    assert answer["outcome"] == "retry"
    assert record["last_error_class"] == "webhook_5xx"
    assert len(sink.received) == 1
    assert_nowhere(WEBHOOK_SECRET, caplog, answer, record)
    assert_nowhere(WEBHOOK_SECRET.removeprefix("whsec_"), caplog, answer, record)
