"""Provider event webhooks: authenticated as each provider documents, idempotent, matched
to send records by message id, and feeding the suppression list."""

from __future__ import annotations

import base64
import dataclasses
import time
from datetime import UTC, datetime

import orjson
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import SecretStr
from sqlalchemy import select

from app.adapters.channels.http import SharedHttp
from app.adapters.channels.postmark import PostmarkProvider
from app.adapters.email_events.ses import SesEvents
from app.adapters.queues.sns.push_format import CertificateStore, SnsPushFormat
from app.db.deliverability_tables import email_events
from app.domain.messages import SendResult
from tests.conftest import make_settings
from tests.support import email_events as ev
from tests.support.channel_servers import serve
from tests.support.dead_letters import ADMIN, publish_reminder
from tests.support.flow import get_reminder, push_message, put_reminder, sweep
from tests.support.native_email_apis import FakeNativeApi
from tests.support.sns import TOPIC_ARN, SnsHost, body, client_ssl


@pytest.fixture
def settings(clean_database_url, tmp_path):
    """Every provider's event webhook configured."""
    return make_settings(
        clean_database_url,
        tmp_path,
        resend_webhook_secret=SecretStr(ev.RESEND_SECRET),
        sendgrid_webhook_public_key=SecretStr(ev.sendgrid_public_key()),
        postmark_webhook_user=ev.POSTMARK_USER,
        postmark_webhook_password=SecretStr(ev.POSTMARK_PASSWORD),
        ses_events_topic_arns=[TOPIC_ARN],
        soft_bounce_limit=2,
    )


@pytest.fixture
async def sns_host(container):
    """A loopback stand-in for SNS; the SES source trusts it (as SNS's own hosts in prod)."""
    host = SnsHost()
    await host.start()
    http = SharedHttp()
    store = CertificateStore(http, host_pattern="localhost", ssl=client_ssl())
    ses = SesEvents(SnsPushFormat([TOPIC_ARN], store, http))
    container.event_sources = {**container.event_sources, "ses": ses}
    yield host
    await http.aclose()
    await host.stop()


async def sent_email(client, publisher, clock, provider, reminder_id: str, message_id: str):
    """A reminder sent through the provider, which answered ``message_id``."""
    message = await publish_reminder(client, publisher, clock, reminder_id)
    provider.script.append(SendResult(message_id))
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    return "cust_" + reminder_id.replace(":", "_") + "@example.com"


async def suppression(client, email: str) -> dict | None:
    response = await client.get(f"/v1/suppressions/{email}", headers=ADMIN)
    return response.json() if response.status_code == 200 else None


async def stored_events(container) -> list[dict]:
    """Every row of email_events (what the intake kept)."""
    async with container.engine.connect() as conn:
        rows = await conn.execute(select(email_events).order_by(email_events.c.id))
        return [dict(row._mapping) for row in rows]


async def test_resend_delivery_sets_the_send_records_status(client, publisher, clock, provider):
    """email.delivered names our provider_request_id: the record shows delivered."""
    email = await sent_email(client, publisher, clock, provider, "r:d", "4ef9a417-02e9")
    raw, headers = ev.resend_post(
        ev.resend_event("email.delivered", email_id="4ef9a417-02e9", to=email)
    )
    answer = await client.post("/events/email/resend", content=raw, headers=headers)
    assert answer.status_code == 200 and answer.json()["matched"] == 1
    [record] = (await get_reminder(client, "r:d"))["send_records"]
    assert record["delivery_status"] == "delivered"
    assert record["delivery_status_at"].startswith("2026-12-01T09:00:00")


async def test_a_hard_bounce_suppresses_and_the_next_reminder_is_not_sent(
    client, publisher, clock, provider
):
    """A bounce event, delivered twice, suppresses once; the next reminder to that address
    ends suppressed without a provider call."""
    email = await sent_email(client, publisher, clock, provider, "r:b1", "msg-b1")
    bounce = ev.resend_event(
        "email.bounced", email_id="msg-b1", to=email,
        bounce={"message": "550 5.1.1 no such user", "subType": "General", "type": "Permanent"},
    )  # fmt: skip
    raw, headers = ev.resend_post(bounce, msg_id="msg_bounce_1")
    first = await client.post("/events/email/resend", content=raw, headers=headers)
    again = await client.post("/events/email/resend", content=raw, headers=headers)
    assert first.json() == {"received": 1, "new": 1, "matched": 1, "suppressed": 1}
    assert again.json() == {"received": 1, "new": 0, "matched": 0, "suppressed": 0}
    shown = await suppression(client, email)
    assert shown["reason"] == "hard_bounce" and shown["source_event_id"] == "msg_bounce_1"
    calls = len(provider.calls)
    [record] = (await get_reminder(client, "r:b1"))["send_records"]
    assert record["delivery_status"] == "bounced" and "no such user" in record["delivery_detail"]
    await put_reminder(client, "r:b1:next", customer_id="cust_r_b1", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "suppressed" and len(provider.calls) == calls


async def test_sendgrid_batch_bounce_spamreport_and_unknown_messages(
    client, publisher, clock, provider
):
    """A signed batch: a bounce and a spam report suppress; an event about a message we
    never sent is accepted (200) and changes only its address."""
    email = await sent_email(client, publisher, clock, provider, "r:sg", "14c5d75ce93")
    batch = [
        ev.sendgrid_event("delivered", message_id="14c5d75ce93", email=email, response="250 OK"),
        ev.sendgrid_event("spamreport", message_id="14c5d75ce93", email=email),
        ev.sendgrid_event("bounce", message_id="unknown-1", email="Gone@Example.org",
                          type="bounce", status="5.1.1", reason="550 5.1.1 user unknown"),
        ev.sendgrid_event("open", message_id="14c5d75ce93", email=email),
    ]  # fmt: skip
    raw, headers = ev.sendgrid_post(batch)
    answer = await client.post("/events/email/sendgrid", content=raw, headers=headers)
    assert answer.json() == {"received": 3, "new": 3, "matched": 2, "suppressed": 2}
    assert (await suppression(client, email))["reason"] == "complaint"
    assert (await suppression(client, "Gone@example.org"))["reason"] == "hard_bounce"
    [record] = (await get_reminder(client, "r:sg"))["send_records"]
    assert record["delivery_status"] == "complained"


async def test_postmark_soft_bounces_suppress_only_past_the_limit(client):
    """Soft bounces suppress at REMINDERS_SOFT_BOUNCE_LIMIT (2 here) within the window."""
    for n in (1, 2):
        record = ev.postmark_bounce(f"pm-{n}", "soft@example.com", kind="SoftBounce", record_id=n)
        answer = await client.post(
            "/events/email/postmark", content=orjson.dumps(record), headers=ev.postmark_headers()
        )
        assert answer.status_code == 200
        suppressed = await suppression(client, "soft@example.com")
        assert (suppressed is not None) == (n == 2)
    assert suppressed["reason"] == "soft_bounces"


async def test_postmark_hard_bounce_and_delivery(client, publisher, clock, provider):
    """Basic credentials as configured: a delivery then a hard bounce of the same message."""
    email = await sent_email(client, publisher, clock, provider, "r:pm", "b7bc2f4a-e38e")
    for record in (ev.postmark_delivery("b7bc2f4a-e38e", email),
                   ev.postmark_bounce("b7bc2f4a-e38e", email, record_id=42)):  # fmt: skip
        answer = await client.post(
            "/events/email/postmark", content=orjson.dumps(record), headers=ev.postmark_headers()
        )
        assert answer.json()["matched"] == 1
    assert (await suppression(client, email))["reason"] == "hard_bounce"
    [record] = (await get_reminder(client, "r:pm"))["send_records"]
    assert record["delivery_status"] == "bounced"


async def test_ses_complaint_through_sns_suppresses(client, publisher, clock, provider, sns_host):
    """An SNS-signed SES complaint (SNS signature verified, topic allow-listed) suppresses
    the address; the subscription handshake of the SES topic is confirmed."""
    clock.set(datetime.now(UTC))
    confirm = sns_host.confirmation(at=clock.now)
    answer = await client.post("/events/email/ses", content=body(confirm))
    assert answer.json() == {"control": "subscription confirmed"} and sns_host.confirmations
    email = await sent_email(client, publisher, clock, provider, "r:ses", "0100018c-ses-1")
    note = sns_host.notification(ev.ses_complaint("0100018c-ses-1", email), at=clock.now)
    answer = await client.post("/events/email/ses", content=body(note))
    assert answer.json() == {"received": 1, "new": 1, "matched": 1, "suppressed": 1}
    assert (await suppression(client, email))["reason"] == "complaint"


@pytest.mark.parametrize("provider_name", ["resend", "sendgrid", "postmark", "ses"])
async def test_forged_events_are_refused_and_change_nothing(
    client, container, publisher, clock, provider, sns_host, provider_name
):
    """Each provider's post about a message we sent, signed with the wrong key (or with
    wrong credentials): 401, and nothing changed: no event row, no delivery status on the
    send record, no suppression."""
    clock.set(datetime.now(UTC))
    email = await sent_email(client, publisher, clock, provider, "r:forged", "msg-forged")
    if provider_name == "resend":
        forged = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
        raw, headers = ev.resend_post(
            ev.resend_event("email.complained", email_id="msg-forged", to=email), secret=forged
        )
    elif provider_name == "sendgrid":
        other = ec.generate_private_key(ec.SECP256R1())
        raw, headers = ev.sendgrid_post(
            [ev.sendgrid_event("spamreport", message_id="msg-forged", email=email)], key=other
        )
    elif provider_name == "postmark":
        raw = orjson.dumps(ev.postmark_bounce("msg-forged", email))
        headers = ev.postmark_headers(password="guessed")
    else:
        note = sns_host.notification(ev.ses_complaint("msg-forged", email), at=clock.now)
        note["Message"] = note["Message"].replace("abuse", "fraud")  # tampered after signing
        raw, headers = body(note), {}
    answer = await client.post(f"/events/email/{provider_name}", content=raw, headers=headers)
    assert answer.status_code == 401
    assert await stored_events(container) == []
    [record] = (await get_reminder(client, "r:forged"))["send_records"]
    assert record["provider_request_id"] == "msg-forged"
    assert record["delivery_status"] is None and record["delivery_status_at"] is None
    assert record["delivery_detail"] is None
    assert await suppression(client, email) is None
    page = (await client.get("/v1/suppressions", headers=ADMIN)).json()
    assert page["items"] == []


async def test_malformed_and_unconfigured(client, container):
    """An authentic body that is not the documented shape: 400; a provider without a
    credential configured: 404."""
    raw_object = b'{"not": "an array"}'
    stamp = str(int(time.time()))
    signature = ev.sendgrid_key().sign(stamp.encode() + raw_object, ec.ECDSA(hashes.SHA256()))
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
    }
    answer = await client.post("/events/email/sendgrid", content=raw_object, headers=headers)
    assert answer.status_code == 400 and answer.json()["error"] == "malformed_event"
    container.event_sources = {}
    assert (await client.post("/events/email/resend", content=b"{}")).status_code == 404


async def test_a_postmark_send_is_matched_by_the_message_id_postmark_gave(
    client, container, publisher, clock
):
    """Sent through the Postmark provider (a loopback Postmark), the record stores
    Postmark's MessageID, and Postmark's bounce for that id is matched to it."""
    fake = FakeNativeApi("postmark", credential="server-token")
    http = SharedHttp()
    async with serve(fake.app()) as url:
        postmark = PostmarkProvider(
            http, server_token=SecretStr("server-token"), sender="r@example.com", base_url=url
        )
        container.receiver = dataclasses.replace(
            container.receiver, providers={"email": postmark, "webhook": postmark}
        )
        message = await publish_reminder(client, publisher, clock, "r:native")
        assert (await push_message(client, message)).json()["outcome"] == "sent"
    await http.aclose()
    [record] = (await get_reminder(client, "r:native"))["send_records"]
    assert record["provider"] == "postmark" and record["provider_request_id"]
    bounce = ev.postmark_bounce(record["provider_request_id"], "cust_r_native@example.com")
    answer = await client.post(
        "/events/email/postmark", content=orjson.dumps(bounce), headers=ev.postmark_headers()
    )
    assert answer.json()["matched"] == 1
    [record] = (await get_reminder(client, "r:native"))["send_records"]
    assert record["delivery_status"] == "bounced"


# --- Header names, event mappings, malformed and unknown ------------------------------------


async def test_resend_accepts_the_standard_webhooks_header_names(
    client, container, publisher, clock, provider
):
    """``webhook-id`` / ``-timestamp`` / ``-signature`` verify like the ``svix-*`` names;
    the ``webhook-id`` names the event, so its repeat changes nothing."""
    email = await sent_email(client, publisher, clock, provider, "r:wh", "5a1f0c3e-wh")
    bounce = ev.resend_event(
        "email.bounced", email_id="5a1f0c3e-wh", to=email,
        bounce={"message": "550 5.1.1 no such user", "subType": "General", "type": "Permanent"},
    )  # fmt: skip
    raw = orjson.dumps(bounce)
    headers = ev.resend_headers(raw, "msg_2x9webhook", prefix="webhook")
    assert not any(name.startswith("svix-") for name in headers)
    first = await client.post("/events/email/resend", content=raw, headers=headers)
    again = await client.post("/events/email/resend", content=raw, headers=headers)
    assert first.json() == {"received": 1, "new": 1, "matched": 1, "suppressed": 1}
    assert again.json() == {"received": 1, "new": 0, "matched": 0, "suppressed": 0}
    assert (await suppression(client, email))["source_event_id"] == "msg_2x9webhook"
    [stored] = await stored_events(container)
    assert stored["event_id"] == "msg_2x9webhook" and stored["kind"] == "hard_bounce"
    tampered = {**headers, "webhook-signature": ev.resend_headers(b"{}", "msg_2x9webhook")[
        "svix-signature"]}  # fmt: skip
    refused = await client.post("/events/email/resend", content=raw, headers=tampered)
    assert refused.status_code == 401


@pytest.mark.parametrize(
    ("case", "status", "kind", "detail"),
    [
        ("sendgrid:bounce_blocked", "bounced", "soft_bounce", "blocked 5.7.1"),
        ("sendgrid:dropped", "bounced", "hard_bounce", "Bounced Address"),
        ("sendgrid:deferred", "deferred", "deferred", "400 try again later"),
        ("resend:email.delivery_delayed", "deferred", "deferred", None),
        ("ses:Transient", "bounced", "soft_bounce", "Transient/MailboxFull"),
    ],
)
async def test_each_documented_event_sets_its_status_and_suppresses_only_hard_bounces(
    client, container, publisher, clock, provider, sns_host, case, status, kind, detail
):
    """A blocked SendGrid bounce, a deferral, Resend's delivery delay and an SES Transient
    bounce set the record's status and suppress nothing (one soft bounce is under the
    limit); SendGrid's ``dropped`` for a bounced address is a hard bounce and suppresses."""
    clock.set(datetime.now(UTC))  # SNS signatures are checked against the current time
    source, name = case.split(":")
    email = await sent_email(client, publisher, clock, provider, f"r:{name}", f"{name}-id-1")
    if source == "sendgrid":
        raw, headers = ev.sendgrid_post([ev.sendgrid_documented(name, f"{name}-id-1", email)])
    elif source == "resend":
        raw = orjson.dumps(ev.resend_delivery_delayed(f"{name}-id-1", email))
        headers = ev.resend_headers(raw, "msg_delayed_1")
    else:
        note = sns_host.notification(ev.ses_transient_bounce(f"{name}-id-1", email), at=clock.now)
        raw, headers = body(note), {}
    answer = await client.post(f"/events/email/{source}", content=raw, headers=headers)
    hard = kind == "hard_bounce"
    assert answer.json() == {"received": 1, "new": 1, "matched": 1, "suppressed": int(hard)}
    [record] = (await get_reminder(client, f"r:{name}"))["send_records"]
    assert record["delivery_status"] == status
    assert detail is None or detail in record["delivery_detail"]
    [stored] = await stored_events(container)
    assert stored["kind"] == kind and stored["send_record_id"] is not None
    shown = await suppression(client, email)
    assert (shown["reason"] if shown else None) == ("hard_bounce" if hard else None)


def sns_signed(sns_host, message: str, at: datetime) -> bytes:
    """An authentic SNS notification on the SES topic whose ``Message`` is ``message``."""
    note = sns_host.notification({}, at=at)
    unsigned = {k: v for k, v in note.items() if k not in ("Signature", "SignatureVersion",
                                                          "SigningCertURL")}  # fmt: skip
    return body(sns_host.sign({**unsigned, "Message": message}))


@pytest.mark.parametrize("provider_name", ["resend", "postmark", "ses"])
@pytest.mark.parametrize("shape", ["not_json", "wrong_shape"])
async def test_an_authentic_malformed_body_is_400_and_stores_nothing(
    client, container, sns_host, clock, provider_name, shape
):
    """Authentic (signed or with the right credentials) but not the documented body: 400
    ``malformed_event``, never a 5xx, nothing stored."""
    clock.set(datetime.now(UTC))
    raw = b"<html>not json</html>" if shape == "not_json" else b'[{"RecordType": "Bounce"}]'
    if provider_name == "resend":
        headers = ev.resend_headers(raw, "msg_malformed")
    elif provider_name == "postmark":
        headers = ev.postmark_headers()
    else:  # SNS's envelope is authentic; the SES notification inside it is not
        raw, headers = sns_signed(sns_host, raw.decode(), clock.now), {}
    answer = await client.post(f"/events/email/{provider_name}", content=raw, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "malformed_event"
    assert await stored_events(container) == []


@pytest.mark.parametrize("provider_name", ["resend", "postmark", "ses"])
async def test_an_authentic_event_about_an_unknown_message_is_accepted(
    client, container, sns_host, clock, provider_name
):
    """A delivery report naming a message we never sent: 200 (the provider must not retry
    it), kept unmatched, no suppression."""
    clock.set(datetime.now(UTC))
    email = "stranger@example.com"
    if provider_name == "resend":
        raw = orjson.dumps(ev.resend_event("email.delivered", email_id="never-sent-1", to=email))
        headers = ev.resend_headers(raw, "msg_unknown_1")
    elif provider_name == "postmark":
        raw, headers = (
            orjson.dumps(ev.postmark_delivery("never-sent-1", email)),
            ev.postmark_headers(),
        )
    else:
        delivery = ev.ses_delivery("never-sent-1", email)
        raw, headers = body(sns_host.notification(delivery, at=clock.now)), {}
    answer = await client.post(f"/events/email/{provider_name}", content=raw, headers=headers)
    assert answer.status_code == 200
    assert answer.json() == {"received": 1, "new": 1, "matched": 0, "suppressed": 0}
    [stored] = await stored_events(container)
    assert stored["send_record_id"] is None and stored["provider_message_id"] == "never-sent-1"
    assert await suppression(client, email) is None
