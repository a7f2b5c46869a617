"""The SES v2 provider against moto's server (its own process on loopback)."""

from __future__ import annotations

import pytest

from app.adapters.channels.ses import SesProvider
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import RenderedMessage
from tests.support.channel_servers import free_port
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
