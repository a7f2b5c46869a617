"""The push route's front door: signatures, rotation, size caps, malformed and hostile input."""

import hashlib
import hmac
import json
import time

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.flow import push, put_customer, put_reminder, scrape
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET, envelope, signed
from tests.support.rows import dead_letter_rows, send_record_rows

# Module-level anyio mark: it makes pytest collect the async tests with their own
# parameters (the conftest's late marker would replace them with one [asyncio] item).
pytestmark = pytest.mark.anyio

LIMIT = 256 * 1024 + 16 * 1024  # REMINDERS_PUSH_MAX_BODY_BYTES default
ANSWER_OUTCOMES = {
    "sent",
    "duplicate",
    "suppressed",
    "cancelled",
    "stale",
    "expired",
    "terminal",
    "dead_lettered",
    "rejected",
    "retry",
    "busy",
}


@pytest.fixture
async def reminder(client, clock):
    """A reminder due now, so an authentic push for it would be sent."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    return "r1"


def hmac_hex(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


async def assert_nothing_stored(container, provider) -> None:
    """No ledger row, no dead letter and no provider call."""
    assert await send_record_rows(container.engine) == []
    assert await dead_letter_rows(container.engine) == []
    assert provider.calls == []


BODY = orjson.dumps(envelope("r1"))


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing-header"),
        pytest.param({"X-Infrai-Signature": ""}, id="empty-header"),
        pytest.param({"X-Infrai-Signature": "sha256=" + "0" * 64}, id="bad-signature"),
        pytest.param({"X-Infrai-Signature": "sha256=not-hex-at-all"}, id="non-hex"),
        pytest.param({"X-Infrai-Signature": hmac_hex("wrong-secret", BODY)}, id="wrong-secret"),
        pytest.param(
            {"X-Infrai-Signature": hmac_hex(PUSH_SECRET, BODY + b" ")}, id="other-body-signed"
        ),
        pytest.param({"Authorization": f"Bearer {PUSH_SECRET}"}, id="bearer-instead"),
    ],
)
async def test_unauthenticated_pushes_are_refused_and_not_processed(
    client, container, provider, reminder, headers
):
    """Missing, wrong, non-hex or wrong-secret signatures → 401 and nothing stored or sent."""
    response = await client.post(
        "/push/reminders", content=BODY, headers={"content-type": "application/json", **headers}
    )
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    await assert_nothing_stored(container, provider)


async def test_stale_timestamp_is_refused(client, container, provider, reminder):
    """A correctly signed push whose timestamp is more than 300 s old → 401."""
    raw, headers = signed(envelope("r1"), timestamp=int(time.time()) - 400)
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code == 401
    await assert_nothing_stored(container, provider)


async def test_replayed_signature_with_a_fresh_timestamp_is_refused(
    client, container, provider, reminder
):
    """Changing the timestamp header of a signed push breaks the signature."""
    raw, headers = signed(envelope("r1"), timestamp=int(time.time()) - 400)
    headers["X-Infrai-Timestamp"] = str(int(time.time()))
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code == 401
    await assert_nothing_stored(container, provider)


@pytest.mark.parametrize(
    "form",
    ["prefixed", "bare-hex", "timestamped", "next-secret", "next-secret-timestamped"],
)
async def test_accepted_signature_forms(client, provider, reminder, form):
    """sha256= prefix, bare hex, the timestamp form and the NEXT (rotation) secret all work."""
    secret = NEXT_PUSH_SECRET if form.startswith("next") else PUSH_SECRET
    stamp = int(time.time()) if form.endswith("timestamped") else None
    raw, headers = signed(envelope("r1"), secret=secret, timestamp=stamp)
    if form == "bare-hex":
        headers["X-Infrai-Signature"] = headers["X-Infrai-Signature"].removeprefix("sha256=")
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code == 200
    assert response.json()["outcome"] == "sent"
    assert len(provider.calls) == 1


def padded(size: int) -> bytes:
    """A valid signed envelope padded with JSON whitespace to exactly ``size`` bytes."""
    raw = orjson.dumps(envelope("r1"))
    return raw + b" " * (size - len(raw))


async def test_body_at_the_limit_is_accepted(client, provider, reminder):
    """A body of exactly REMINDERS_PUSH_MAX_BODY_BYTES is processed."""
    raw, headers = signed(padded(LIMIT))
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert (response.status_code, response.json()["outcome"]) == (200, "sent")


async def test_oversized_body_with_content_length_is_refused(client, container, provider, reminder):
    """One byte over the cap, declared in Content-Length → 413, never processed."""
    raw, headers = signed(padded(LIMIT + 1))
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    await assert_nothing_stored(container, provider)


async def test_oversized_chunked_body_is_refused(client, container, provider, reminder):
    """Over the cap without Content-Length (chunked) → 413 while reading, never processed."""
    raw, headers = signed(padded(LIMIT + 1))

    async def chunks():
        for start in range(0, len(raw), 16 * 1024):
            yield raw[start : start + 16 * 1024]

    request = client.build_request("POST", "/push/reminders", content=chunks(), headers=headers)
    assert "content-length" not in request.headers
    response = await client.send(request)
    assert response.status_code == 413
    await assert_nothing_stored(container, provider)


async def test_lying_small_content_length_does_not_bypass_the_cap(client, container, provider):
    """The cap counts bytes actually read, whatever the declared length (ASGI stream)."""
    raw, headers = signed(padded(LIMIT * 2))

    async def chunks():
        yield raw

    request = client.build_request("POST", "/push/reminders", content=chunks(), headers=headers)
    request.headers["content-length"] = "10"
    response = await client.send(request)
    assert response.status_code == 413
    await assert_nothing_stored(container, provider)


@pytest.mark.parametrize(
    ("body", "reason_fragment"),
    [
        pytest.param(b"{not json", "not JSON", id="not-json"),
        pytest.param(b"[1, 2, 3]", "not a JSON object", id="array"),
        pytest.param(
            orjson.dumps({"payload": envelope("r1")["payload"]}), "message_id", id="no-id"
        ),
        pytest.param(
            orjson.dumps({"message_id": "m1", "payload": {**envelope("r1")["payload"], "v": 9}}),
            "version",
            id="bad-version",
        ),
        pytest.param(orjson.dumps({"message_id": "m1"}), "payload", id="no-payload"),
        pytest.param(
            orjson.dumps(
                {"message_id": "m1", "payload": {**envelope("r1")["payload"], "channel": ["email"]}}
            ),
            "channel",
            id="channel-list",
        ),
    ],
)
async def test_authentic_malformed_push_is_rejected_once(
    client, container, provider, reminder, body, reason_fragment
):
    """Authentic but unusable → 200 rejected and one dead_letters row, even when redelivered."""
    for _ in range(2):
        raw, headers = signed(body)
        response = await client.post("/push/reminders", content=raw, headers=headers)
        assert response.status_code == 200
        assert response.json()["outcome"] == "rejected"
        assert response.json()["ack"] is True
        assert reason_fragment in response.json()["detail"]
    [dead] = await dead_letter_rows(container.engine)
    assert dead["reason"] == "malformed"
    assert dead["queue"] == "reminders"
    assert dead["message_id"]
    assert await send_record_rows(container.engine) == []
    assert provider.calls == []


async def test_hostile_identifiers_are_rejected_not_crashing(client, container, provider):
    """NUL bytes and odd unicode in ids are answered (never a 500) and kept for operators."""
    for number, reminder_id in enumerate(["a\x00b", "\u202e\ufeff", "🦀" * 50, "x" * 200]):
        response = await push(client, envelope(reminder_id, message_id=f"m\x00{number}"))
        assert response.status_code == 200, response.text
        assert response.json()["outcome"] == "rejected"
    assert len(await dead_letter_rows(container.engine)) == 4
    assert provider.calls == []


async def test_a_queue_this_service_does_not_serve_is_404_before_anything(
    client, container, caplog
):
    """An unconfigured queue name (here longer than any column) answers 404 before reading
    the body: no dead letter, no log line, no metric sample carries the name."""
    queue = "q" * 300
    raw, headers = signed(b"{broken")
    with caplog.at_level("DEBUG", logger="reminders"):
        response = await client.post(f"/push/{queue}", content=raw, headers=headers)
        unsigned = await client.post("/push/not-configured", content=b"{}")
    assert (response.status_code, unsigned.status_code) == (404, 404)
    assert response.json()["error"] == "not_found"
    assert await dead_letter_rows(container.engine) == []
    assert [r for r in caplog.records if r.name.startswith("reminders")] == []
    metrics = await scrape(client)
    assert queue not in metrics and "not-configured" not in metrics


HOSTILE = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HOSTILE
@given(body=st.binary(max_size=300))
async def test_random_signed_bytes_never_cause_a_500(client, reminder, body):
    """Any correctly signed bytes get 200 rejected (or a real outcome), never a server error."""
    raw, headers = signed(body)
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code in (200, 503), response.text
    assert response.json()["outcome"] in ANSWER_OUTCOMES


JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
PAYLOADS = st.fixed_dictionaries(
    {},
    optional={
        "v": st.just(1) | JSON_VALUES,
        "reminder_id": st.sampled_from(["r1", "unknown"]) | st.text(max_size=210) | JSON_VALUES,
        "channel": st.sampled_from(["email", "webhook", "sms"]) | JSON_VALUES,
        "schedule_version": st.integers(min_value=-1, max_value=3) | JSON_VALUES,
    },
)


@HOSTILE
@given(
    message_id=st.text(max_size=300) | JSON_VALUES,
    payload=PAYLOADS | JSON_VALUES,
    extra=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=3),
)
async def test_random_signed_envelopes_never_cause_a_500(
    client, reminder, message_id, payload, extra
):
    """Structured but hostile envelopes are answered with a named outcome, never a 500."""
    body = {**extra, "message_id": message_id, "payload": payload}
    raw, headers = signed(json.dumps(body).encode())  # json: ints beyond 64 bits too
    response = await client.post("/push/reminders", content=raw, headers=headers)
    assert response.status_code in (200, 503), response.text
    assert response.json()["outcome"] in ANSWER_OUTCOMES
