"""Two replicas that disagree about a provider's circuit share one database: the failover
rule in the claim keeps them from sending one reminder through two providers.

Replica B (Postmark's circuit closed) is sending through Postmark, whose loopback server
holds the request; replica A (Postmark's circuit open) gets a redelivery of the same
reminder meanwhile. A may not hand the send over (Postmark's row is held) and answers
busy; SMTP (aiosmtpd) never sees the reminder. Counted at the providers.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import timedelta

import pytest
from aiohttp import web
from pydantic import SecretStr

from app.container import build_container
from app.domain.messages import Delivery
from app.domain.states import Outcome
from app.services.receive import receive_delivery
from tests.conftest import REAL_MAIL, make_settings
from tests.support.channel_servers import serve, smtp_server
from tests.support.clock import FakeClock
from tests.support.ledger_states import NOW, seed_enqueued

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TOKEN = "replica-postmark-server-token-0123456789"


def _delivery() -> Delivery:
    payload = {"v": 1, "reminder_id": "rem-0", "channel": "email", "schedule_version": 1}
    return Delivery(queue="reminders", message_id="m-1", payload=payload)


async def test_a_replica_with_an_open_circuit_cannot_send_what_another_is_sending(
    clean_database_url, tmp_path
):
    """B's Postmark call is under way; A (circuit open) is refused both the hand-over and
    SMTP; once B's call is accepted, A's next try is a duplicate. One message in all."""
    arrived, release = asyncio.Event(), asyncio.Event()
    received: list[str] = []

    async def postmark(request: web.Request) -> web.Response:
        received.append((await request.json())["Metadata"]["ledger_key"])
        arrived.set()
        await release.wait()
        return web.json_response({"MessageID": str(uuid.uuid4()), "ErrorCode": 0})

    app = web.Application()
    app.router.add_post("/email", postmark)
    clock = FakeClock(NOW)
    with smtp_server() as smtp:
        async with serve(app) as base_url:
            settings = make_settings(
                clean_database_url, tmp_path, **REAL_MAIL, email_providers=["postmark", "smtp"],
                postmark_api_url=base_url, postmark_server_token=SecretStr(TOKEN),
                smtp_host=smtp.host, smtp_port=smtp.port, smtp_security="none",
                unsubscribe_secret=SecretStr("replica-unsubscribe-secret-0123456789abcd"),
                usefulness_grace_seconds=10**7, circuit_failures=1,
            )  # fmt: skip
            a = build_container(settings, clock=clock, rand=random.Random(1))
            b = build_container(settings, clock=clock, rand=random.Random(2))
            try:
                await seed_enqueued(a.engine, 1, channels=("email",), email="ada@example.com")
                a.receiver.breakers["postmark"].record(clock(), failed=True)  # A: open
                sending = asyncio.ensure_future(receive_delivery(b.receiver, _delivery()))
                await asyncio.wait_for(arrived.wait(), 10)
                meanwhile = await receive_delivery(a.receiver, _delivery())
                release.set()
                sent = await sending
                clock.advance(seconds=1)
                after = await receive_delivery(a.receiver, _delivery())
            finally:
                release.set()
                await a.aclose()
                await b.aclose()
        smtp_messages = len(smtp.handler.messages)
    assert (meanwhile.outcome, meanwhile.detail) == (Outcome.BUSY, "lease held")
    assert sent.outcome == Outcome.SENT
    assert after.outcome == Outcome.DUPLICATE
    assert (received, smtp_messages) == (["rem-0:email:postmark"], 0)
    assert meanwhile.retry_after is not None
    assert meanwhile.retry_after <= timedelta(seconds=settings.lease_seconds).total_seconds()
