"""The ChannelProvider contract, run against every real provider and its real local server.

What the receiver relies on: a result or one of the three provider errors (never anything
else), the timeout honoured, a stable identity for a resend under the same key, a permanent
error for a message with no recipient, and a transient one when the server is unreachable.
"""

from __future__ import annotations

import time

import pytest

from app.domain.errors import PermanentProviderError, ProviderError, TransientProviderError
from app.domain.messages import RenderedMessage, SendResult
from tests.contract.real_channels import REAL_CHANNEL_HARNESSES

pytestmark = pytest.mark.anyio

KEY = "contract:r1:channel:provider"


@pytest.fixture(params=sorted(REAL_CHANNEL_HARNESSES))
async def harness(request):
    """Each real provider in front of its local server."""
    async with REAL_CHANNEL_HARNESSES[request.param]() as running:
        yield running


async def test_accepted_send_returns_a_result_that_fits_the_ledger(harness):
    """A SendResult whose request id (if any) fits provider_request_id (255)."""
    result = await harness.provider.send(harness.message, idempotency_key=KEY, timeout=5)
    assert isinstance(result, SendResult)
    assert result.provider_request_id is None or len(result.provider_request_id) <= 255
    assert 0 < len(harness.provider.name) <= 64
    assert len(harness.delivered_ids()) == 1


async def test_resend_with_the_same_key_carries_the_same_identity(harness):
    """Two sends under one key look like one message to whoever deduplicates."""
    await harness.provider.send(harness.message, idempotency_key=KEY, timeout=5)
    await harness.provider.send(harness.message, idempotency_key=KEY, timeout=5)
    await harness.provider.send(harness.message, idempotency_key=KEY + ":other", timeout=5)
    first, second, other = harness.delivered_ids()
    assert first == second != other


async def test_a_hanging_server_is_a_transient_error_within_the_timeout(harness):
    """The provider gives up by itself at ``timeout`` (the receiver's lease depends on it)."""
    harness.hang()
    started = time.monotonic()
    with pytest.raises(TransientProviderError):
        await harness.provider.send(harness.message, idempotency_key=KEY, timeout=0.5)
    # Bounded by the timeout, not by the server: generous slack for a loaded machine (a
    # provider that ignored the timeout would hang here until the test's own timeout).
    assert time.monotonic() - started < 0.5 + 2.0


async def test_unreachable_server_is_transient(harness):
    """Nothing listening: transient, so the send is retried."""
    with pytest.raises(TransientProviderError):
        await harness.unreachable.send(harness.message, idempotency_key=KEY, timeout=2)


async def test_no_recipient_is_permanent(harness):
    """A message with nowhere to go is never retried."""
    message = RenderedMessage(
        harness.message.channel,
        "",
        subject=harness.message.subject,
        text=harness.message.text,
        body=harness.message.body,
    )
    with pytest.raises(PermanentProviderError):
        await harness.provider.send(message, idempotency_key=KEY, timeout=5)


async def test_failures_are_only_provider_errors(harness):
    """Whatever goes wrong, only the three provider error types escape."""
    harness.hang()
    try:
        await harness.provider.send(harness.message, idempotency_key=KEY, timeout=0.3)
    except Exception as error:  # the assertion is on the type
        assert isinstance(error, ProviderError)
        assert error.detail_class
    else:
        pytest.fail("a hanging server cannot accept the message")
