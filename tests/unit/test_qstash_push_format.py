"""The QStash push format: Upstash-Signature JWTs as Upstash documents them."""

import base64
import hashlib

import jwt
import orjson
import pytest

from app.adapters.queues.qstash.push_format import QStashPushFormat
from app.domain.errors import MalformedDelivery, Unauthenticated
from app.domain.messages import PushRequest
from tests.support.qstash import CURRENT_KEY, NEXT_KEY, PUSH_URL, mint, push_headers

pytestmark = pytest.mark.anyio

NOW = 1_786_000_000.0
BODY = orjson.dumps({"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1})


def fmt() -> QStashPushFormat:
    return QStashPushFormat([CURRENT_KEY.encode(), NEXT_KEY.encode()], push_url=PUSH_URL)


def signed(token: str) -> dict[str, str]:
    return {"upstash-signature": token}


@pytest.mark.parametrize("key", [CURRENT_KEY, NEXT_KEY])
async def test_current_and_next_signing_keys_are_accepted(key):
    """Either key verifies (rotation), and the delivery reads QStash's headers."""
    headers = push_headers(BODY, issued_at=NOW, key=key, message_id="msg_7", retried=2)
    await fmt().authenticate(PushRequest(BODY, headers), now=NOW + 1)
    delivery = fmt().parse("reminders", PushRequest(BODY, headers))
    assert (delivery.message_id, delivery.attempt) == ("msg_7", 3)
    assert delivery.payload == orjson.loads(BODY)


async def test_a_body_claim_without_padding_is_accepted():
    """Padding of the base64url body hash is not significant."""
    unpadded = base64.urlsafe_b64encode(hashlib.sha256(BODY).digest()).decode().rstrip("=")
    await fmt().authenticate(
        PushRequest(BODY, signed(mint(BODY, issued_at=NOW, body=unpadded))), now=NOW
    )


@pytest.mark.parametrize(
    ("token", "fragment"),
    [
        (mint(BODY, issued_at=NOW, key="sig_someone_else_9Lq2TzP4wKxR7mNvB3cD"), "configured key"),
        (mint(BODY, issued_at=NOW, sub="https://reminders.example.com/push/other"), "subject"),
        (mint(BODY, issued_at=NOW, sub="http://10.0.0.5:8000/push/reminders"), "subject"),
        (mint(BODY + b" ", issued_at=NOW), "body hash"),
        (mint(BODY, issued_at=NOW, iss="Someone"), "issuer"),
        (mint(BODY, issued_at=NOW - 400), "expired"),
        (mint(BODY, issued_at=NOW + 120), "not valid yet"),
        ("not.a.jwt", "not a valid JWT"),
        (jwt.encode({"iss": "Upstash", "sub": PUSH_URL}, CURRENT_KEY), "valid JWT"),
        (jwt.encode({"body": "x"}, "k" * 64, algorithm="HS512"), "valid JWT"),
    ],
    ids=[
        "wrong-key", "wrong-sub", "proxied-url-as-sub", "wrong-body-hash", "wrong-issuer",
        "expired", "not-yet-valid", "garbage", "missing-claims", "other-algorithm",
    ],
)  # fmt: skip
async def test_refused_signatures(token, fragment):
    """Each way a token can be wrong is Unauthenticated, naming what was wrong."""
    with pytest.raises(Unauthenticated, match=fragment):
        await fmt().authenticate(PushRequest(BODY, signed(token)), now=NOW)


async def test_small_clock_differences_are_tolerated():
    """exp and nbf get a 30-second leeway by default."""
    await fmt().authenticate(PushRequest(BODY, signed(mint(BODY, issued_at=NOW - 320))), now=NOW)
    await fmt().authenticate(PushRequest(BODY, signed(mint(BODY, issued_at=NOW + 20))), now=NOW)


async def test_a_missing_signature_is_refused():
    """No Upstash-Signature header, no entry."""
    with pytest.raises(Unauthenticated, match="missing"):
        await fmt().authenticate(PushRequest(BODY, {}), now=NOW)


def test_an_authentic_request_without_message_id_or_json_is_malformed():
    """Unusable but authentic requests are MalformedDelivery (quarantined, acknowledged)."""
    with pytest.raises(MalformedDelivery, match="Message-Id"):
        fmt().parse("reminders", PushRequest(BODY, {}))
    with pytest.raises(MalformedDelivery, match="JSON"):
        fmt().parse("reminders", PushRequest(b"plain", {"upstash-message-id": "msg_1"}))
