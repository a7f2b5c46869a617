"""Google OIDC push tokens, checked against certificates served on loopback, and the
Cloud Tasks / Pub/Sub push formats with their shared-secret fallbacks."""

from __future__ import annotations

import base64
import time

import orjson
import pytest

from app.adapters.channels.http import SharedHttp
from app.adapters.push_formats.google_oidc import OidcRequirements, build_oidc_verifier
from app.adapters.push_formats.signatures import sign
from app.adapters.queues.cloudtasks.push_format import CloudTasksPushFormat
from app.adapters.queues.pubsub.push_format import PubSubPushFormat
from app.domain.errors import AuthenticationUnavailable, MalformedDelivery, Unauthenticated
from app.domain.messages import PushRequest
from tests.support.channel_servers import free_port
from tests.support.google_tokens import (
    AUDIENCE,
    SERVICE_ACCOUNT,
    SigningKey,
    certificate_server,
)

pytestmark = pytest.mark.anyio

NOW = time.time()
SECRET = b"push-secret-current"
BODY = b'{"v":1,"reminder_id":"r1","channel":"email","schedule_version":1}'
GOOGLE_KEY = SigningKey.generate("google-key-1")
OTHER_KEY = SigningKey.generate("google-key-1")  # same key id, not Google's key


@pytest.fixture
async def google():
    """Google's certificate endpoint (one published key) and an HTTP pool."""
    http = SharedHttp()
    async with certificate_server([GOOGLE_KEY]) as server:
        yield server, http
    await http.aclose()


def verifier_for(server, http):
    return build_oidc_verifier(OidcRequirements(AUDIENCE, SERVICE_ACCOUNT, server.url), http)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_a_token_from_the_configured_service_account_is_accepted(google):
    """Signature, issuer, audience, service account and verified email all hold: accepted."""
    claims = await verifier_for(*google).verify(bearer(GOOGLE_KEY.mint(NOW)), now=NOW)
    assert claims["email"] == SERVICE_ACCOUNT


@pytest.mark.parametrize(
    ("token", "fragment"),
    [
        (GOOGLE_KEY.mint(NOW, aud="https://someone-else.example/push"), "audience"),
        (GOOGLE_KEY.mint(NOW, email="other@test-project.iam.gserviceaccount.com"), "account"),
        (GOOGLE_KEY.mint(NOW, email_verified=False), "not verified"),
        (GOOGLE_KEY.mint(NOW, email_verified=None), "not verified"),
        (GOOGLE_KEY.mint(NOW - 7200), "expired"),
        (GOOGLE_KEY.mint(NOW, iss="https://evil.example"), "issued by Google"),
        (OTHER_KEY.mint(NOW), "signature"),
        (SigningKey.generate("unknown-kid").mint(NOW), "unknown key"),
        ("not-a-jwt", "JWT"),
    ],
    ids=[
        "wrong-audience",
        "wrong-service-account",
        "unverified-email",
        "no-email-verified-claim",
        "expired",
        "wrong-issuer",
        "wrong-key",
        "unknown-key-id",
        "garbage",
    ],
)
async def test_tokens_that_fail_a_check_are_refused(google, token, fragment):
    """Each failed check is refused and named."""
    with pytest.raises(Unauthenticated, match=fragment):
        await verifier_for(*google).verify(bearer(token), now=NOW)


async def test_a_missing_bearer_token_is_refused(google):
    """No Authorization header, or another scheme: refused."""
    verifier = verifier_for(*google)
    for headers in ({}, {"authorization": f"Basic {GOOGLE_KEY.mint(NOW)}"}):
        with pytest.raises(Unauthenticated, match="bearer"):
            await verifier.verify(headers, now=NOW)


async def test_certificates_are_fetched_once_per_max_age(google):
    """Many tokens within the max-age cost one certificate fetch; after it, one more."""
    server, http = google
    verifier = verifier_for(server, http)
    for offset in range(5):
        await verifier.verify(bearer(GOOGLE_KEY.mint(NOW + offset)), now=NOW + offset)
    assert server.fetches == 1
    later = NOW + server.max_age + 1
    await verifier.verify(bearer(GOOGLE_KEY.mint(later)), now=later)
    assert server.fetches == 2


async def test_unknown_key_ids_refetch_at_most_once_a_minute(google):
    """A rotated-in key is picked up, but forged key ids cannot hammer the endpoint."""
    server, http = google
    verifier = verifier_for(server, http)
    await verifier.verify(bearer(GOOGLE_KEY.mint(NOW)), now=NOW)
    rotated = SigningKey.generate("google-key-2")
    for _ in range(3):
        with pytest.raises(Unauthenticated, match="unknown key"):
            await verifier.verify(bearer(rotated.mint(NOW)), now=NOW + 1)
    server.keys.append(rotated)
    with pytest.raises(Unauthenticated, match="unknown key"):
        await verifier.verify(bearer(rotated.mint(NOW)), now=NOW + 30)
    assert server.fetches == 1  # four unknown-key tokens inside a minute: no refetch
    await verifier.verify(bearer(rotated.mint(NOW + 61)), now=NOW + 61)
    assert server.fetches == 2


async def test_certificates_that_cannot_be_fetched_make_the_token_unverifiable_not_invalid():
    """Google's certificate endpoint down (nothing listens): AuthenticationUnavailable (our
    side failed, the queue must retry), never Unauthenticated (a 401 would tell it to stop)."""
    http = SharedHttp()
    down = f"http://127.0.0.1:{free_port()}/oauth2/v1/certs"
    verifier = build_oidc_verifier(OidcRequirements(AUDIENCE, SERVICE_ACCOUNT, down), http)
    try:
        for at in (NOW, NOW + 1):  # the refetch that failed and the cached failure
            with pytest.raises(AuthenticationUnavailable, match="certificates"):
                await verifier.verify(bearer(GOOGLE_KEY.mint(at)), now=at)
    finally:
        await http.aclose()


async def test_an_endpoint_answering_500_is_unavailable_until_it_recovers(google):
    """500 from the certificate endpoint: unavailable; after the refetch interval, once it
    answers again, the same token verifies and a bad one is refused (401 again)."""
    server, http = google
    server.status = 500
    verifier = verifier_for(server, http)
    with pytest.raises(AuthenticationUnavailable):
        await verifier.verify(bearer(GOOGLE_KEY.mint(NOW)), now=NOW)
    server.status = 200
    later = NOW + 61
    await verifier.verify(bearer(GOOGLE_KEY.mint(later)), now=later)
    with pytest.raises(Unauthenticated, match="signature"):
        await verifier.verify(bearer(OTHER_KEY.mint(later)), now=later)


async def test_keys_already_held_keep_verifying_during_an_outage(google):
    """Past the max-age the refresh fails: the keys we had still verify their tokens, and a
    key id we never saw is unavailable rather than refused."""
    server, http = google
    verifier = verifier_for(server, http)
    await verifier.verify(bearer(GOOGLE_KEY.mint(NOW)), now=NOW)
    server.status = 503
    later = NOW + server.max_age + 1
    await verifier.verify(bearer(GOOGLE_KEY.mint(later)), now=later)
    assert server.fetches == 2
    with pytest.raises(AuthenticationUnavailable):
        await verifier.verify(bearer(SigningKey.generate("new").mint(later)), now=later)


def task_request(body: bytes = BODY, **headers: str) -> PushRequest:
    base = {"x-cloudtasks-taskname": "abc123", "x-cloudtasks-taskretrycount": "2"}
    return PushRequest(body, base | headers)


async def test_cloudtasks_hmac_fallback_accepts_our_signature_only():
    """Without OIDC, the task's sha256= header over the body authenticates; a change does not."""
    fmt = CloudTasksPushFormat(oidc=None, secrets=[SECRET], signature_header="X-Sig")
    await fmt.authenticate(task_request(**{"x-sig": sign(SECRET, BODY)}), now=NOW)
    for request in (
        task_request(**{"x-sig": sign(b"other-secret", BODY)}),
        task_request(BODY + b" ", **{"x-sig": sign(SECRET, BODY)}),
        task_request(),
    ):
        with pytest.raises(Unauthenticated):
            await fmt.authenticate(request, now=NOW)


async def test_cloudtasks_with_oidc_ignores_the_hmac_header(google):
    """With OIDC configured, an HMAC header alone is not enough; the token is."""
    fmt = CloudTasksPushFormat(oidc=verifier_for(*google), secrets=[SECRET], signature_header="X")
    with pytest.raises(Unauthenticated, match="bearer"):
        await fmt.authenticate(task_request(x=sign(SECRET, BODY)), now=NOW)
    await fmt.authenticate(task_request(**bearer(GOOGLE_KEY.mint(NOW))), now=NOW)


def test_cloudtasks_parse_reads_task_headers():
    """Task name → message id, retry count + 1 → attempt, the body → payload."""
    fmt = CloudTasksPushFormat(oidc=None, secrets=[SECRET], signature_header="X")
    delivery = fmt.parse("email-q", task_request())
    assert (delivery.queue, delivery.message_id, delivery.attempt) == ("email-q", "abc123", 3)
    assert delivery.payload == orjson.loads(BODY)
    with pytest.raises(MalformedDelivery, match="TaskName"):
        fmt.parse("q", PushRequest(BODY, {}))
    with pytest.raises(MalformedDelivery, match="JSON"):
        fmt.parse("q", task_request(b"not json"))


async def test_pubsub_token_fallback_accepts_any_configured_token():
    """Without OIDC, ?token= must equal one of the push secrets (current or next)."""
    fmt = PubSubPushFormat(oidc=None, tokens=[SECRET, b"next-secret"])
    for token in ("push-secret-current", "next-secret"):
        await fmt.authenticate(PushRequest(b"{}", {}, {"token": token}), now=NOW)
    for query in ({}, {"token": ""}, {"token": "push-secret-curren"}, {"tok": "next-secret"}):
        with pytest.raises(Unauthenticated):
            await fmt.authenticate(PushRequest(b"{}", {}, query), now=NOW)


async def test_pubsub_with_oidc_ignores_the_token(google):
    """With OIDC configured, the query token alone is refused."""
    fmt = PubSubPushFormat(oidc=verifier_for(*google), tokens=[SECRET])
    with pytest.raises(Unauthenticated):
        await fmt.authenticate(PushRequest(b"{}", {}, {"token": SECRET.decode()}), now=NOW)
    await fmt.authenticate(PushRequest(b"{}", bearer(GOOGLE_KEY.mint(NOW))), now=NOW)


def wrapped(**message_fields) -> bytes:
    message = {"data": base64.b64encode(BODY).decode(), "messageId": "42"} | message_fields
    return orjson.dumps({"message": message, "subscription": "projects/p/subscriptions/s"})


def test_pubsub_parse_wrapped_and_emulator_forms():
    """messageId (or the emulator's message_id), base64 data, deliveryAttempt when present."""
    fmt = PubSubPushFormat(oidc=None, tokens=[SECRET])
    delivery = fmt.parse("q", PushRequest(wrapped(), {}))
    assert (delivery.message_id, delivery.attempt) == ("42", None)
    assert delivery.payload == orjson.loads(BODY)
    emulator = {"data": base64.b64encode(BODY).decode(), "message_id": "7", "attributes": {}}
    body = orjson.dumps({"message": emulator, "subscription": "s"})
    assert fmt.parse("q", PushRequest(body, {})).message_id == "7"
    envelope = orjson.loads(wrapped()) | {"deliveryAttempt": 4}
    assert fmt.parse("q", PushRequest(orjson.dumps(envelope), {})).attempt == 4


def test_pubsub_parse_unwrapped_with_metadata_headers():
    """Unwrapped: the body is our payload, the id and attempt come from x-goog-pubsub-*."""
    fmt = PubSubPushFormat(oidc=None, tokens=[SECRET])
    headers = {"x-goog-pubsub-message-id": "99", "x-goog-pubsub-delivery-attempt": "2"}
    delivery = fmt.parse("q", PushRequest(BODY, headers))
    assert (delivery.message_id, delivery.attempt) == ("99", 2)
    assert delivery.payload == orjson.loads(BODY)
    with pytest.raises(MalformedDelivery, match="message-id"):
        fmt.parse("q", PushRequest(BODY, {}))


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (orjson.dumps({"message": {"data": "!!", "messageId": "1"}}), "base64"),
        (orjson.dumps({"message": {"messageId": "1"}}), "data"),
        (orjson.dumps({"message": {"data": "e30="}}), "messageId"),
        (wrapped(data=base64.b64encode(b"not json").decode()), "JSON"),
    ],
)
def test_pubsub_parse_refuses_unusable_envelopes(body, fragment):
    """Malformed wrapped envelopes are MalformedDelivery naming the problem."""
    with pytest.raises(MalformedDelivery, match=fragment):
        PubSubPushFormat(oidc=None, tokens=[SECRET]).parse("q", PushRequest(body, {}))
