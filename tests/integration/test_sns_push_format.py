"""The SNS push format against messages signed as AWS documents, certificates over HTTPS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.sns.push_format import CertificateStore, SnsPushFormat, string_to_sign
from app.domain.errors import AuthenticationUnavailable, MalformedDelivery, Unauthenticated
from app.domain.messages import PushRequest
from tests.support.sns import TOPIC_ARN, SnsHost, body, client_ssl


def req(message: dict) -> PushRequest:
    """The push as SNS sends it: the JSON envelope as text/plain."""
    return PushRequest(body(message), {"content-type": "text/plain; charset=UTF-8"})


pytestmark = pytest.mark.anyio

AT = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
NOW = AT.timestamp() + 2
PAYLOAD = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}


@pytest.fixture
async def sns() -> AsyncIterator[SnsHost]:
    host = SnsHost()
    await host.start()
    yield host
    await host.stop()


@pytest.fixture
async def http() -> AsyncIterator[SharedHttp]:
    shared = SharedHttp()
    yield shared
    await shared.aclose()


def sns_format(http: SharedHttp, sns: SnsHost) -> SnsPushFormat:
    """The format trusting the test CA, with SNS hosts = localhost (the loopback server)."""
    store = CertificateStore(http, host_pattern="localhost", ssl=client_ssl())
    return SnsPushFormat([TOPIC_ARN], store, http)


@pytest.fixture
def fmt(http: SharedHttp, sns: SnsHost) -> SnsPushFormat:
    return sns_format(http, sns)


@pytest.mark.parametrize("version", ["1", "2"])
async def test_both_signature_versions_verify_and_parse(fmt, sns, version):
    """SHA1withRSA (v1) and SHA256withRSA (v2) notifications are accepted and read."""
    message = sns.notification(PAYLOAD, at=AT, version=version)
    await fmt.authenticate(req(message), now=NOW)
    assert await fmt.handle_control(req(message)) is None
    delivery = fmt.parse("reminders", req(message))
    assert (delivery.message_id, delivery.payload) == (message["MessageId"], PAYLOAD)
    assert delivery.attempt is None


async def test_a_subject_is_part_of_the_signature(fmt, sns):
    """Subject is signed when present; one added afterwards breaks the signature."""
    await fmt.authenticate(req(sns.notification(PAYLOAD, at=AT, Subject="hi")), now=NOW)
    added = {**sns.notification(PAYLOAD, at=AT), "Subject": "added"}
    with pytest.raises(Unauthenticated, match="does not match"):
        await fmt.authenticate(req(added), now=NOW)


async def test_the_certificate_is_fetched_once_and_cached(fmt, sns):
    """Many messages signed with one certificate cost one HTTPS fetch."""
    for _ in range(3):
        await fmt.authenticate(req(sns.notification(PAYLOAD, at=AT)), now=NOW)
    assert sns.certificate_fetches == 1


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"Message": '{"v": 1, "reminder_id": "r2"}'}, "does not match"),
        ({"Signature": "bm90IGEgc2lnbmF0dXJl"}, "does not match"),
        ({"Signature": "***"}, "does not match"),
        ({"SignatureVersion": "3"}, "SignatureVersion"),
        ({"TopicArn": "arn:aws:sns:us-east-1:999999999999:theirs"}, "configured topic"),
        ({"Type": "Other"}, "message type"),
        ({"Timestamp": "yesterday"}, "ISO 8601"),
    ],
)
async def test_tampered_messages_are_refused(fmt, sns, change, fragment):
    """Any change after signing, a foreign topic or an unknown version is Unauthenticated."""
    message = {**sns.notification(PAYLOAD, at=AT), **change}
    with pytest.raises(Unauthenticated, match=fragment):
        await fmt.authenticate(req(message), now=NOW)


async def test_a_foreign_topic_signed_by_aws_is_refused(fmt, sns):
    """AWS signs for every account's topics: the topic must be one we configured."""
    theirs = sns.notification(PAYLOAD, at=AT, TopicArn="arn:aws:sns:us-east-1:9:theirs")
    with pytest.raises(Unauthenticated, match="configured topic"):
        await fmt.authenticate(req(theirs), now=NOW)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost.evil.example"])
async def test_certificates_come_only_from_sns_hosts(fmt, sns, host):
    """A SigningCertURL outside the SNS host pattern is never fetched."""
    message = sns.notification(PAYLOAD, at=AT)
    message["SigningCertURL"] = message["SigningCertURL"].replace("localhost", host)
    resigned = sns.sign({k: v for k, v in message.items() if k != "Signature"})
    resigned["SigningCertURL"] = message["SigningCertURL"]
    with pytest.raises(Unauthenticated, match="not an SNS host"):
        await fmt.authenticate(req(resigned), now=NOW)
    assert sns.certificate_fetches == 0


async def test_certificates_are_fetched_over_https_only(fmt, sns):
    """An http:// SigningCertURL is refused before any fetch."""
    message = sns.notification(PAYLOAD, at=AT)
    message["SigningCertURL"] = message["SigningCertURL"].replace("https://", "http://")
    with pytest.raises(Unauthenticated, match="not an SNS host"):
        await fmt.authenticate(req(message), now=NOW)
    assert sns.certificate_fetches == 0


@pytest.mark.parametrize("skew", [timedelta(seconds=-3901), timedelta(minutes=6)])
async def test_timestamps_outside_our_tolerance_are_refused(fmt, sns, skew):
    """65 minutes back (SNS redelivers the original message for up to an hour), 5 ahead."""
    message = sns.notification(PAYLOAD, at=AT + skew)
    with pytest.raises(Unauthenticated, match="tolerance"):
        await fmt.authenticate(req(message), now=AT.timestamp())


async def test_an_unreachable_certificate_host_is_our_failure_not_the_senders(http, sns):
    """A certificate fetch that fails asks SNS to retry (5xx), it does not drop (4xx)."""
    fmt = sns_format(http, sns)
    message = sns.notification(PAYLOAD, at=AT)
    await sns.stop()
    with pytest.raises(AuthenticationUnavailable):
        await fmt.authenticate(req(message), now=NOW)


async def test_a_subscription_of_our_topic_is_confirmed_by_a_get_of_subscribe_url(fmt, sns):
    """SubscriptionConfirmation: verified, then confirmed with one GET of SubscribeURL."""
    message = sns.confirmation(at=AT)
    await fmt.authenticate(req(message), now=NOW)
    assert await fmt.handle_control(req(message)) == "subscription confirmed"
    [query] = sns.confirmations
    assert "Action=ConfirmSubscription" in query and f"Token={message['Token']}" in query


async def test_a_subscription_of_another_topic_is_never_confirmed(fmt, sns):
    """A confirmation for a topic we did not configure fails authentication: no GET."""
    message = sns.confirmation(at=AT, TopicArn="arn:aws:sns:us-east-1:9:theirs")
    with pytest.raises(Unauthenticated, match="configured topic"):
        await fmt.authenticate(req(message), now=NOW)
    assert sns.confirmations == []


async def test_a_subscribe_url_off_the_sns_hosts_is_never_fetched(fmt, sns):
    """Even signed, a SubscribeURL that is not an SNS host over https is refused."""
    message = sns.confirmation(at=AT, SubscribeURL="https://127.0.0.1:1/?Action=Confirm")
    await fmt.authenticate(req(message), now=NOW)
    with pytest.raises(Unauthenticated, match="SubscribeURL"):
        await fmt.handle_control(req(message))
    assert sns.confirmations == []


async def test_an_unsubscribe_confirmation_is_noted_without_a_request(fmt, sns):
    """UnsubscribeConfirmation is logged and acknowledged; nothing is fetched."""
    message = sns.confirmation(at=AT, kind="UnsubscribeConfirmation")
    await fmt.authenticate(req(message), now=NOW)
    assert await fmt.handle_control(req(message)) == "unsubscribe confirmation noted"
    assert sns.confirmations == []


async def test_bodies_that_are_not_sns_messages_are_refused(fmt):
    """Not JSON, or not an object: Unauthenticated before anything else."""
    for raw in (b"not json", b"[1, 2]"):
        with pytest.raises(Unauthenticated):
            await fmt.authenticate(PushRequest(raw, {}), now=NOW)


async def test_an_authentic_notification_without_our_payload_is_malformed(fmt, sns):
    """A Message that is not JSON parses to MalformedDelivery (quarantined, acknowledged)."""
    message = sns.notification(PAYLOAD, at=AT)
    message["Message"] = "plain text"
    with pytest.raises(MalformedDelivery):
        fmt.parse("reminders", req(message))


def test_the_string_to_sign_matches_the_aws_documented_example():
    """AWS's documented Notification example, byte for byte (Subject between MessageId and
    Timestamp; UnsubscribeURL and SigningCertURL are not signed)."""
    message = {
        "Type": "Notification",
        "MessageId": "4d4dc071-ddbf-465d-bba8-08f81c89da64",
        "TopicArn": "arn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P",
        "Subject": "My subject",
        "Message": "My Test Message",
        "Timestamp": "2019-01-31T04:37:04.321Z",
        "UnsubscribeURL": "https://sns.us-east-2.amazonaws.com/?Action=Unsubscribe",
    }
    assert string_to_sign(message) == (
        b"Message\nMy Test Message\nMessageId\n4d4dc071-ddbf-465d-bba8-08f81c89da64\n"
        b"Subject\nMy subject\nTimestamp\n2019-01-31T04:37:04.321Z\n"
        b"TopicArn\narn:aws:sns:us-east-2:123456789012:s4-MySNSTopic-1G1WEFCOXTC0P\n"
        b"Type\nNotification\n"
    )


async def test_a_redelivery_an_hour_after_the_original_is_still_accepted(fmt, sns):
    """SNS retries for up to 3,600 s with the original Timestamp: still inside our tolerance."""
    message = sns.notification(PAYLOAD, at=AT)
    await fmt.authenticate(req(message), now=AT.timestamp() + 3600)
