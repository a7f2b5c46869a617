"""The SES v2 provider against moto's server (its own process on loopback)."""

from __future__ import annotations

import asyncio
import base64
import json
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from app.adapters.channels.ses import SesProvider
from app.domain.errors import PermanentProviderError, RateLimitedError, TransientProviderError
from app.domain.messages import RenderedMessage
from app.domain.retry import BackoffPolicy
from tests.support.channel_servers import free_port, serve
from tests.support.sqs_fixtures import REGION, sqs_endpoint  # noqa: F401  (the moto process)

KEY = "r1:email:ses"
MESSAGE = RenderedMessage(
    channel="email", recipient="ann@example.com", subject="Hi", text="Hello",
    headers={"List-Unsubscribe": "<https://x.example/u/1>"},
)  # fmt: skip


@pytest.fixture
async def ses(sqs_endpoint):  # noqa: F811
    """A provider pointed at moto, with the sender's identity verified there."""
    from aiobotocore.session import get_session

    async with get_session().create_client(
        "sesv2", region_name=REGION, endpoint_url=sqs_endpoint
    ) as client:
        await client.create_email_identity(EmailIdentity="reminders@example.com")
    provider = SesProvider(sender="reminders@example.com", region=REGION, endpoint_url=sqs_endpoint)
    yield provider, sqs_endpoint
    await provider.aclose()


async def test_an_accepted_email_returns_ses_message_id(ses):
    """SendEmail with the raw MIME is accepted; SES's MessageId is the request id."""
    provider, _ = ses
    result = await provider.send(MESSAGE, idempotency_key=KEY, timeout=10)
    assert result.provider_request_id


async def test_an_unverified_sender_is_refused_permanently(sqs_endpoint):  # noqa: F811
    """SES refuses a sender it has not verified (MessageRejected): permanent."""
    provider = SesProvider(
        sender="nobody@unverified.example", region=REGION, endpoint_url=sqs_endpoint
    )
    with pytest.raises(PermanentProviderError) as caught:
        await provider.send(MESSAGE, idempotency_key=KEY, timeout=10)
    await provider.aclose()
    assert caught.value.detail_class == "provider_rejected" and "MessageRejected" in str(
        caught.value
    )


async def test_an_unreachable_endpoint_is_a_connect_error():
    """Nothing listens: the request never left, transient connect_error."""
    provider = SesProvider(
        sender="r@example.com", region=REGION, endpoint_url=f"http://127.0.0.1:{free_port()}"
    )
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(MESSAGE, idempotency_key=KEY, timeout=5)
    await provider.aclose()
    assert caught.value.detail_class == "connect_error"


# --- A loopback SES v2 endpoint --------------------------------------------------------------
# moto's server accepts ConfigurationSetName but neither keeps it nor lets a test read the
# request, and it never throttles or fails. This loopback endpoint answers SendEmail as the
# SES v2 API reference documents (REST-JSON: 200 {"MessageId"}; an error as its HTTP status,
# the x-amzn-ErrorType header naming the error, a JSON body {"message": ...}) and records
# each request exactly as aiobotocore sent it.

SEND_EMAIL_PATH = "/v2/email/outbound-emails"
HANG = 0


@dataclass
class LoopbackSes:
    """``POST /v2/email/outbound-emails``; ``script`` holds (status, error type, message)
    answers to give before accepting."""

    script: list[tuple[int, str, str]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(SEND_EMAIL_PATH, self._send_email)
        return app

    async def _send_email(self, request: web.Request) -> web.Response:
        self.requests.append({"headers": dict(request.headers), "body": await request.read()})
        headers = {"x-amzn-RequestId": str(uuid.uuid4())}
        if self.script:
            status, error_type, message = self.script.pop(0)
            if status == HANG:  # read the request, never answer
                await asyncio.Event().wait()
            body = json.dumps({"message": message}).encode()
            headers["x-amzn-ErrorType"] = error_type
            return web.Response(
                status=status, body=body, headers=headers, content_type="application/json"
            )
        answer = json.dumps({"MessageId": f"0100018c{uuid.uuid4().hex}-000000"}).encode()
        return web.Response(body=answer, headers=headers, content_type="application/json")


@pytest.fixture
async def loopback(monkeypatch):
    """A loopback SES and a provider with a configuration set pointed at it."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    fake = LoopbackSes()
    async with serve(fake.app()) as url:
        provider = SesProvider(
            sender="reminders@example.com", region=REGION, endpoint_url=url,
            configuration_set="reminders-events",
        )  # fmt: skip
        yield fake, provider
        await provider.aclose()


async def test_the_configuration_set_reaches_send_email(loopback):
    """The request aiobotocore sends names ConfigurationSetName (so SES publishes the
    configuration set's events) beside the raw MIME; SES's MessageId comes back."""
    fake, provider = loopback
    result = await provider.send(MESSAGE, idempotency_key=KEY, timeout=10)
    [request] = fake.requests
    body = json.loads(request["body"])
    assert body["ConfigurationSetName"] == "reminders-events"
    assert body["FromEmailAddress"] == "reminders@example.com"
    assert body["Destination"] == {"ToAddresses": ["ann@example.com"]}
    mime = base64.b64decode(body["Content"]["Raw"]["Data"])
    assert b"List-Unsubscribe: <https://x.example/u/1>" in mime
    assert request["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert result.provider_request_id and result.provider_request_id.startswith("0100018c")


@pytest.mark.parametrize(
    ("status", "error_type", "message", "expected", "detail"),
    [
        # SES's sending-rate and daily-quota refusals (its quota docs: ThrottlingException).
        (400, "ThrottlingException", "Maximum sending rate exceeded.", RateLimitedError,
         "rate_limited"),
        (429, "TooManyRequestsException", "Too many requests.", RateLimitedError,
         "rate_limited"),
        (400, "LimitExceededException", "Daily message quota exceeded.", RateLimitedError,
         "rate_limited"),
        (500, "InternalFailure", "An internal error occurred.", TransientProviderError,
         "provider_5xx"),
        (503, "ServiceUnavailable", "Service is unavailable.", TransientProviderError,
         "provider_5xx"),
        (400, "SendingPausedException", "Sending is paused for this account.",
         TransientProviderError, "provider_account"),
        (404, "NotFoundException", "Configuration set <reminders-events> does not exist.",
         TransientProviderError, "provider_account"),
        (400, "MessageRejected", "Email address is not verified. The following identities "
         "failed the check in region US-EAST-1: reminders@example.com",
         PermanentProviderError, "provider_rejected"),
        (400, "BadRequestException", "Missing required key 'Destination'.",
         PermanentProviderError, "provider_rejected"),
    ],
)  # fmt: skip
async def test_ses_answers_are_classified_as_documented(
    loopback, status, error_type, message, expected, detail
):
    """Throttling is rate limited (SES sends no Retry-After: the retry policy's backoff
    sets the delay), 5xx transient, our account's state transient, other 4xx permanent;
    and botocore retries nothing behind our back (one request per send)."""
    fake, provider = loopback
    fake.script.append((status, error_type, message))
    with pytest.raises(expected) as caught:
        await provider.send(MESSAGE, idempotency_key=KEY, timeout=10)
    assert type(caught.value) is expected
    assert caught.value.detail_class == detail and error_type in str(caught.value)
    assert len(fake.requests) == 1
    if expected is RateLimitedError:
        assert caught.value.retry_after is None
        delay = BackoffPolicy().rate_limited_delay(1, caught.value.retry_after, random.Random(7))
        assert 1.0 <= delay <= 10.0


async def test_no_answer_after_the_request_is_an_unknown_outcome_sent_once(loopback):
    """SES read the request and never answered: unknown_outcome, and no second request
    (SendEmail has no idempotency key, so a retry could send the email twice)."""
    fake, provider = loopback
    fake.script.append((HANG, "", ""))
    with pytest.raises(TransientProviderError) as caught:
        await provider.send(MESSAGE, idempotency_key=KEY, timeout=1)
    assert caught.value.detail_class == "unknown_outcome"
    await asyncio.sleep(0.5)
    assert len(fake.requests) == 1
