"""The Infrai push format: signature forms, rotation, timestamp tolerance and the envelope."""

import hashlib
import hmac
import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.adapters.queues.infrai.push_format import InfraiPushFormat, sign
from app.domain.errors import MalformedDelivery, Unauthenticated
from app.domain.messages import parse_delivery_payload

CURRENT = b"current-secret"
NEXT = b"next-secret"
NOW = 1_786_000_000.0
BODY = b'{"message_id":"m1","payload":{"v":1}}'
SIG = "x-infrai-signature"
TS = "x-infrai-timestamp"


def fmt(**options) -> InfraiPushFormat:
    return InfraiPushFormat([CURRENT, NEXT], **options)


def hex_hmac(secret: bytes, data: bytes) -> str:
    return hmac.new(secret, data, hashlib.sha256).hexdigest()


def test_sign_is_prefixed_hex_hmac_of_the_body():
    """sign() produces the documented header value."""
    assert sign(CURRENT, BODY) == "sha256=" + hex_hmac(CURRENT, BODY)
    assert sign(CURRENT, BODY, 1234) == "sha256=" + hex_hmac(CURRENT, b"1234." + BODY)


@pytest.mark.parametrize(
    "value",
    [
        "sha256=" + hex_hmac(CURRENT, BODY),
        hex_hmac(CURRENT, BODY),
        hex_hmac(CURRENT, BODY).upper(),
        "SHA256=" + hex_hmac(CURRENT, BODY),
        "  sha256=" + hex_hmac(CURRENT, BODY) + " ",
    ],
)
def test_accepted_signature_forms(value):
    """Prefixed, bare, upper-case hex and padded values all authenticate."""
    fmt().check_signature(BODY, {SIG: value}, now=NOW)


def test_next_secret_is_accepted_during_rotation():
    """A body signed with the second configured secret authenticates."""
    fmt().check_signature(BODY, {SIG: sign(NEXT, BODY)}, now=NOW)


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({}, "missing"),
        ({SIG: ""}, "missing"),
        ({SIG: "sha256=zz"}, "not hex"),
        ({SIG: "sha256=abc"}, "not hex"),
        ({SIG: "sha256=" + hex_hmac(b"wrong", BODY)}, "does not match"),
        ({SIG: "sha256=" + hex_hmac(CURRENT, BODY)[:-2]}, "does not match"),
        ({SIG: "sha256="}, "does not match"),
    ],
)
def test_refused_signatures(headers, fragment):
    """Missing, non-hex, truncated and wrong-secret signatures are refused."""
    with pytest.raises(Unauthenticated, match=fragment):
        fmt().check_signature(BODY, headers, now=NOW)


def test_signature_covers_every_byte_of_the_body():
    """A body changed after signing no longer authenticates."""
    with pytest.raises(Unauthenticated):
        fmt().check_signature(BODY + b" ", {SIG: sign(CURRENT, BODY)}, now=NOW)


@pytest.mark.parametrize("skew", [0, 299, 300, -300])
def test_timestamp_within_tolerance_is_accepted(skew):
    """A timestamp up to 300 s either side of now authenticates."""
    stamp = int(NOW) + skew
    fmt().check_signature(BODY, {SIG: sign(CURRENT, BODY, stamp), TS: str(stamp)}, now=NOW)


@pytest.mark.parametrize("skew", [301, -301, -86400])
def test_timestamp_outside_tolerance_is_refused(skew):
    """A stale (or far future) timestamp is refused even when correctly signed."""
    stamp = int(NOW) + skew
    with pytest.raises(Unauthenticated, match="tolerance"):
        fmt().check_signature(BODY, {SIG: sign(CURRENT, BODY, stamp), TS: str(stamp)}, now=NOW)


def test_timestamp_is_bound_into_the_signature():
    """With a timestamp header, a signature over the body alone does not authenticate."""
    with pytest.raises(Unauthenticated):
        fmt().check_signature(BODY, {SIG: sign(CURRENT, BODY), TS: str(int(NOW))}, now=NOW)


@pytest.mark.parametrize("stamp", ["yesterday", "1.5e9", "", "1" + "0" * 400, "9" * 5000])
def test_unusable_timestamps_are_refused(stamp):
    """Non-integer or absurd timestamps are refused as unauthenticated, never crash."""
    with pytest.raises(Unauthenticated):
        fmt().check_signature(BODY, {SIG: sign(CURRENT, BODY), TS: stamp}, now=NOW)


def test_header_names_are_configurable():
    """Custom header names are read; the defaults are then ignored."""
    custom = fmt(signature_header="X-Sig", timestamp_header="X-Time")
    stamp = int(NOW)
    custom.check_signature(
        BODY, {"x-sig": sign(CURRENT, BODY, stamp), "x-time": str(stamp)}, now=NOW
    )
    with pytest.raises(Unauthenticated, match="missing"):
        custom.check_signature(BODY, {SIG: sign(CURRENT, BODY)}, now=NOW)


def test_at_least_one_secret_is_required():
    """A format without secrets cannot be built."""
    with pytest.raises(ValueError):
        InfraiPushFormat([])


def test_parse_reads_the_envelope_and_ignores_extra_fields():
    """message_id, payload and an attempt counter are read; unknown fields are ignored."""
    body = orjson.dumps(
        {"message_id": "m-9", "payload": {"v": 1}, "attempt": 3, "queue": "x", "other": [1]}
    )
    delivery = fmt().parse_body("reminders", body)
    assert (delivery.queue, delivery.message_id, delivery.attempt) == ("reminders", "m-9", 3)
    assert delivery.payload == {"v": 1}


def test_parse_unwraps_a_payload_sent_as_a_json_string():
    """Some senders stringify the payload; it is decoded."""
    body = orjson.dumps({"message_id": 5, "payload": '{"v": 1, "reminder_id": "r"}'})
    delivery = fmt().parse_body("q", body)
    assert delivery.message_id == "5"
    assert delivery.payload == {"v": 1, "reminder_id": "r"}


def test_parse_keeps_message_ids_bounded():
    """A very long message id is cut to the column's 255 characters."""
    delivery = fmt().parse_body("q", orjson.dumps({"message_id": "m" * 1000, "payload": {}}))
    assert len(delivery.message_id) == 255


@pytest.mark.parametrize("field", ["delivery_attempt", "attempts"])
def test_parse_reads_alternative_attempt_fields(field):
    """Other attempt counter names are understood; booleans are not counters."""
    assert fmt().parse_body("q", orjson.dumps({"message_id": "m", field: 2})).attempt == 2
    assert fmt().parse_body("q", orjson.dumps({"message_id": "m", "attempt": True})).attempt is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"text"', "not a JSON object"),
        (b'{"payload": {}}', "message_id"),
        (b'{"message_id": "", "payload": {}}', "message_id"),
        (b'{"message_id": true, "payload": {}}', "message_id"),
        (b'{"message_id": null, "payload": {}}', "message_id"),
        (b'{"message_id": {"a": 1}, "payload": {}}', "message_id"),
    ],
)
def test_parse_refuses_unusable_envelopes(body, fragment):
    """Bad JSON, non-objects and missing or odd message ids are MalformedDelivery."""
    with pytest.raises(MalformedDelivery, match=fragment):
        fmt().parse_body("q", body)


@given(st.binary(max_size=512))
def test_arbitrary_bytes_parse_or_raise_malformed(body):
    """Whatever the bytes, parse returns a Delivery or raises MalformedDelivery."""
    try:
        delivery = fmt().parse_body("q", body)
    except MalformedDelivery:
        return
    assert isinstance(delivery.message_id, str) and delivery.message_id


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
PAYLOAD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "v": JSON_VALUES | st.just(1),
        "reminder_id": JSON_VALUES | st.text(min_size=1, max_size=250),
        "channel": JSON_VALUES | st.sampled_from(["email", "webhook", "sms"]),
        "schedule_version": JSON_VALUES | st.integers(min_value=-2, max_value=5),
    },
)


@given(st.one_of(PAYLOAD_FIELDS, JSON_VALUES), JSON_VALUES)
def test_arbitrary_json_envelopes_parse_or_raise_malformed(payload, message_id):
    """Any JSON envelope yields a usable delivery and payload, or MalformedDelivery."""
    # json, not orjson: integers beyond 64 bits must reach the parser too.
    body = json.dumps({"message_id": message_id, "payload": payload}).encode()
    try:
        delivery = fmt().parse_body("q", body)
        parsed = parse_delivery_payload(delivery.payload, channels=frozenset({"email", "webhook"}))
    except MalformedDelivery:
        return
    assert parsed.channel in {"email", "webhook"}
    assert parsed.schedule_version >= 1


@given(st.text(max_size=200), st.one_of(st.none(), st.text(max_size=50)))
def test_arbitrary_headers_authenticate_or_raise_unauthenticated(signature, stamp):
    """Hostile header values are refused with Unauthenticated, never another error."""
    headers = {SIG: signature} if stamp is None else {SIG: signature, TS: stamp}
    with pytest.raises(Unauthenticated):
        fmt().check_signature(BODY, headers, now=NOW)
