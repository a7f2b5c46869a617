"""Structured logs: one JSON line per delivery decision with ids only, request ids, no secrets."""

import io
import logging

import orjson
import pytest

from app.domain.errors import TransientProviderError
from app.observability import StdoutHandler, configure_logging
from app.observability import logs as log_output
from tests.conftest import ADMIN_TOKEN, API_TOKEN, CRON_TOKEN
from tests.support.flow import push, push_message, put_customer, put_reminder, sweep
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

SECRETS = (ADMIN_TOKEN, API_TOKEN, CRON_TOKEN, PUSH_SECRET, NEXT_PUSH_SECRET)
BODY_MARKERS = ("private-note-7731", "ada@example.com", "Lovelace Plan")


@pytest.fixture
def log_lines():
    """Everything logged while the test runs, as configured at startup, but into a buffer."""
    buffer = io.StringIO()
    configure_logging("INFO", stream=buffer)
    yield lambda: [orjson.loads(line) for line in buffer.getvalue().splitlines()]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StdoutHandler)]:
        root.removeHandler(handler)
    log_output._stream = None  # back to stdout for later tests


async def test_each_delivery_decision_is_one_json_line_with_ids_only(
    client, clock, publisher, provider, log_lines
):
    """Retry and sent each log queue, message id, ledger key, outcome, attempt, duration;
    no secret and nothing of the message body appears anywhere in the output."""
    await put_customer(client, "cust_ada", email="ada@example.com")
    await put_reminder(
        client,
        "r:logs",
        customer_id="cust_ada",
        due_at=clock.now,
        data={"note": "private-note-7731", "plan": "Lovelace Plan"},
    )
    await sweep(client)
    [message] = publisher.drain()
    provider.script.append(TransientProviderError("ada@example.com mailbox busy"))
    await push_message(client, message)
    clock.advance(hours=1)
    response = await push(
        client,
        {"message_id": message.message_id, "payload": message.payload},
        queue=message.queue,
    )
    await push(client, {"message_id": "m-bad", "payload": {"v": 1, "note": "private-note-7731"}})

    lines = log_lines()
    deliveries = [line for line in lines if line.get("event") == "delivery"]
    assert [d["outcome"] for d in deliveries] == ["retry", "sent", "rejected"]
    retry, sent, rejected = deliveries
    for entry in (retry, sent):
        assert entry["queue"] == "reminders"
        assert entry["message_id"] == message.message_id
        assert entry["ledger_key"] == "r:logs:email"
        assert isinstance(entry["duration_ms"], float)
        assert entry["level"] == "info" and entry["logger"] == "reminders.delivery"
    assert (retry["attempt"], sent["attempt"]) == (1, 2)
    assert retry["detail"] == "transient"
    assert rejected["detail"] == "malformed"
    assert sent["request_id"] == response.headers["x-request-id"]
    raw = "\n".join(orjson.dumps(line).decode() for line in lines)
    for forbidden in (*SECRETS, *BODY_MARKERS):
        assert forbidden not in raw, f"{forbidden!r} leaked into the logs"


async def test_a_sane_request_id_is_kept_and_a_hostile_one_replaced(client, log_lines):
    """X-Request-ID is echoed when it is a plain token; anything else gets a fresh id."""
    kept = await client.get("/healthz", headers={"X-Request-ID": "abc-123.req"})
    assert kept.headers["x-request-id"] == "abc-123.req"
    for bad in (b'a"b}<script>', b"y" * 300, "\u00ff".encode("latin-1")):
        hostile = await client.get("/healthz", headers={"X-Request-ID": bad})
        assert len(hostile.headers["x-request-id"]) == 32  # a fresh uuid4 hex
