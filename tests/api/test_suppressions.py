"""The suppression list: the operator API, and the receiver consulting it before any send."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import orjson
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from app.adapters.channels.smtp import SmtpProvider
from app.adapters.email_events.postmark import PostmarkEvents
from app.db.engine import create_engine
from app.db.ledger import ledger_for
from app.db.suppressions import DbSuppressionList
from app.domain.errors import LedgerUnavailable
from app.domain.suppression import Suppression, SuppressionReason
from tests.support import email_events as ev
from tests.support.channel_servers import smtp_server
from tests.support.dead_letters import ADMIN, publish_reminder
from tests.support.flow import API, CRON, get_reminder, push_message, scrape


async def test_put_get_delete_normalizes_the_domain_part(client):
    """An address is stored with its domain lower-cased and found by any casing of it."""
    put = await client.put(
        "/v1/suppressions/Ann.Lee@Example.COM", json={"detail": "asked by phone"}, headers=ADMIN
    )
    assert put.status_code == 200, put.text
    assert put.json()["email"] == "Ann.Lee@example.com"
    assert put.json()["reason"] == "manual" and put.json()["source"] == "api"
    shown = await client.get("/v1/suppressions/Ann.Lee@EXAMPLE.com", headers=ADMIN)
    assert shown.json()["detail"] == "asked by phone"
    # The local part is kept as given: another casing of it is another address.
    other = await client.get("/v1/suppressions/ann.lee@example.com", headers=ADMIN)
    assert other.status_code == 404
    lifted = await client.delete("/v1/suppressions/ann.lee@example.com", headers=ADMIN)
    assert lifted.status_code == 404
    lifted = await client.delete("/v1/suppressions/Ann.Lee@example.com", headers=ADMIN)
    assert lifted.status_code == 200
    gone = await client.get("/v1/suppressions/Ann.Lee@example.com", headers=ADMIN)
    assert gone.status_code == 404


async def test_a_complaint_is_lifted_only_with_force(client, container):
    """DELETE of a complaint answers 409 naming force=true, and lifts it with force."""
    entry = Suppression("spam@example.com", SuppressionReason.COMPLAINT, source="ses")
    assert await DbSuppressionList(container.engine, container.receiver.ledger).suppress(
        entry, now=container.clock()
    )
    refused = await client.delete("/v1/suppressions/spam@example.com", headers=ADMIN)
    assert refused.status_code == 409 and "force=true" in refused.json()["message"]
    lifted = await client.delete("/v1/suppressions/spam@example.com?force=true", headers=ADMIN)
    assert lifted.status_code == 200 and lifted.json()["reason"] == "complaint"


async def test_a_stronger_reason_replaces_a_weaker_one(container):
    """A complaint overwrites a bounce; a later bounce leaves the complaint in place."""
    suppressions = DbSuppressionList(container.engine, container.receiver.ledger)
    now = container.clock()
    address = "x@example.com"
    assert await suppressions.suppress(
        Suppression(address, SuppressionReason.HARD_BOUNCE, source="ses"), now=now
    )
    assert await suppressions.suppress(
        Suppression(address, SuppressionReason.COMPLAINT, source="ses"), now=now
    )
    assert not await suppressions.suppress(
        Suppression(address, SuppressionReason.HARD_BOUNCE, source="ses"), now=now
    )
    assert await suppressions.reason_for(address) == "complaint"


async def test_concurrent_lookups_share_statements_and_each_gets_its_own_answer(container):
    """Forty sends asking at once: each hears about its own address only (a suppressed
    one and a clean one alike, a repeated address too), in a handful of statements."""
    suppressions = DbSuppressionList(container.engine, container.receiver.ledger)
    now = container.clock()
    for n in range(0, 40, 3):
        await suppressions.suppress(
            Suppression(f"u{n}@example.com", SuppressionReason.HARD_BOUNCE, source="ses"), now=now
        )
    asked = [f"u{n}@example.com" for n in range(40)] + ["u3@example.com", "u4@example.com"]
    answers = await asyncio.gather(*(suppressions.reason_for(email) for email in asked))
    expected = ["hard_bounce" if int(email[1:].split("@")[0]) % 3 == 0 else None for email in asked]
    assert answers == expected
    assert suppressions.lookup_statements < 10
    # One customer's many reminders ask for one address: reads of it share a statement too.
    before = suppressions.lookup_statements
    same = await asyncio.gather(*(suppressions.reason_for("u3@example.com") for _ in range(30)))
    assert same == ["hard_bounce"] * 30 and suppressions.lookup_statements - before < 5


async def test_the_list_pages_by_keyset_and_filters(client, container):
    """Pages in address order with a cursor; reason and domain narrow the list."""
    suppressions = DbSuppressionList(container.engine, container.receiver.ledger)
    for n in range(5):
        reason = SuppressionReason.HARD_BOUNCE if n % 2 else SuppressionReason.COMPLAINT
        domain = "a.example" if n < 3 else "b.example"
        entry = Suppression(f"u{n}@{domain}", reason, source="sendgrid")
        await suppressions.suppress(entry, now=container.clock())
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/suppressions", params=params, headers=ADMIN)).json()
        seen += [item["email"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"u{n}@{'a' if n < 3 else 'b'}.example" for n in range(5)]
    bounced = await client.get("/v1/suppressions?reason=hard_bounce", headers=ADMIN)
    assert [i["email"] for i in bounced.json()["items"]] == ["u1@a.example", "u3@b.example"]
    by_domain = await client.get("/v1/suppressions?domain=B.example", headers=ADMIN)
    assert [i["email"] for i in by_domain.json()["items"]] == ["u3@b.example", "u4@b.example"]
    garbled = await client.get("/v1/suppressions?cursor=nonsense", headers=ADMIN)
    assert garbled.status_code == 422


async def test_the_routes_need_the_admin_token(client):
    """Without the operator's bearer token: 401."""
    assert (await client.get("/v1/suppressions")).status_code == 401
    assert (await client.put("/v1/suppressions/a@b.example")).status_code == 401


async def test_a_suppressed_address_gets_no_provider_call(
    client, container, publisher, clock, provider
):
    """The receiver finalizes a send to a suppressed address as ``suppressed`` with error
    class ``address_suppressed``, and never calls the provider."""
    message = await publish_reminder(client, publisher, clock, "r:blocked")
    # The customer's address as registered, in another casing of its domain.
    await client.put("/v1/suppressions/cust_r_blocked@EXAMPLE.com", headers=ADMIN)
    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "suppressed" and answer["detail"] == "address_suppressed"
    assert provider.calls == []
    [record] = (await get_reminder(client, "r:blocked"))["send_records"]
    assert record["state"] == "terminal_failure"
    assert record["last_error_class"] == "address_suppressed"


async def test_smtp_refusal_at_rcpt_suppresses_the_address(client, container, publisher, clock):
    """Our SMTP server answers 550 to RCPT TO: the send is terminal, the address is
    suppressed (reason smtp_rejected), and the next reminder to it makes no SMTP call."""
    with smtp_server() as server:
        smtp = SmtpProvider(
            host=server.host, port=server.port, sender="r@example.com", security="none"
        )
        container.receiver = dataclasses.replace(
            container.receiver, providers={"email": smtp, "webhook": smtp}
        )
        server.handler.mode = "550"
        first = await publish_reminder(client, publisher, clock, "r:one")
        answer = (await push_message(client, first)).json()
        assert answer["outcome"] == "terminal" and answer["detail"] == "smtp_rcpt_5xx"
        shown = await client.get("/v1/suppressions/cust_r_one@example.com", headers=ADMIN)
        assert shown.json()["reason"] == "smtp_rejected" and shown.json()["source"] == "smtp"
        server.handler.mode = "accept"
        await client.put(
            "/v1/reminders/r:two",
            json={"customer_id": "cust_r_one", "kind": "weekly_digest",
                  "due_at": clock.now.isoformat(), "channels": ["email"]},
            headers=API,
        )  # fmt: skip
        await client.post("/cron/sweep", headers=CRON)
        [second] = publisher.drain()
        answer = (await push_message(client, second)).json()
        assert answer["outcome"] == "suppressed"
        assert server.handler.messages == []


async def test_metrics_show_suppressions_and_rates(client):
    """/metrics has the suppression gauge by reason and the 24 h rates (0 without sends)."""
    await client.put("/v1/suppressions/m@example.com", headers=ADMIN)
    text = await scrape(client)
    assert 'reminders_suppressions{reason="manual"} 1.0' in text
    assert "reminders_email_bounce_rate_24h 0.0" in text
    assert "reminders_email_complaint_rate_24h 0.0" in text


async def test_every_grouped_lookup_hears_of_an_unreachable_database():
    """No database: each waiting send gets LedgerUnavailable (answered "retry"), none hangs."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once the block ends: nothing listens there
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{port}/none")
    suppressions = DbSuppressionList(engine, ledger_for(engine, raw_connections=2))
    try:
        answers = await asyncio.gather(
            *(suppressions.reason_for(f"u{n}@example.com") for n in range(5)),
            return_exceptions=True,
        )
    finally:
        await engine.dispose()
    assert all(isinstance(answer, LedgerUnavailable) for answer in answers), answers


def _sample(text: str, name: str, labels: dict[str, str]) -> float:
    """One sample of a scrape (0 when absent: a counter not yet incremented)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


async def test_metrics_count_new_events_by_provider_and_kind(client, container):
    """reminders_email_events_total counts each new event under its provider and kind;
    a repeat of an event already received is not counted again."""
    container.event_sources = {
        "postmark": PostmarkEvents(ev.POSTMARK_USER, SecretStr(ev.POSTMARK_PASSWORD))
    }
    name = "reminders_email_events_total"
    bounce = {"provider": "postmark", "kind": "hard_bounce"}
    delivered = {"provider": "postmark", "kind": "delivered"}
    before = await scrape(client)
    posts = [
        ev.postmark_delivery("pm-metrics-1", "first@example.com"),
        ev.postmark_bounce("pm-metrics-2", "second@example.com", record_id=7001),
        ev.postmark_bounce("pm-metrics-2", "second@example.com", record_id=7001),  # a repeat
    ]
    for record in posts:
        answer = await client.post(
            "/events/email/postmark", content=orjson.dumps(record), headers=ev.postmark_headers()
        )
        assert answer.status_code == 200
    after = await scrape(client)
    assert _sample(after, name, bounce) - _sample(before, name, bounce) == 1
    assert _sample(after, name, delivered) - _sample(before, name, delivered) == 1
    assert 'reminders_suppressions{reason="hard_bounce"} 1.0' in after
