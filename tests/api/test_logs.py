"""Structured logs: one JSON line per delivery decision with ids only, request ids, no secrets."""

import asyncio
import io
import logging
import re

import orjson
import pytest

from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.messages import SendResult
from app.observability import logs as log_output
from app.observability.logs import configure_logging
from tests.conftest import ADMIN_TOKEN, API_TOKEN, CRON_TOKEN
from tests.support.flow import push, push_message, put_customer, put_reminder, sweep
from tests.support.push import NEXT_PUSH_SECRET, PUSH_SECRET

SECRETS = (ADMIN_TOKEN, API_TOKEN, CRON_TOKEN, PUSH_SECRET, NEXT_PUSH_SECRET)
BODY_MARKERS = ("private-note-7731", "ada@example.com", "Lovelace Plan")


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
        assert entry["logger"] == "reminders.delivery"
    assert (retry["attempt"], sent["attempt"]) == (1, 2)
    assert retry["detail"] == "transient"
    assert rejected["detail"] == "malformed"
    # Log-level alerting sees failures: a retry and a refused message warn, a send is info.
    assert [d["level"] for d in deliveries] == ["warning", "info", "warning"]
    assert (retry["error_class"], sent["error_class"]) == ("transient", None)
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


async def test_each_api_request_is_one_access_line_with_the_route_template(
    client, clock, log_lines
):
    """Method, route template, status, duration and request id — not the path's ids, not
    the token, not the body."""
    await put_customer(client, "cust_path_7731", email="ada@example.com")
    response = await client.put(
        "/v1/reminders/r-path-7731",
        json={"customer_id": "nobody-7731", "kind": "renewal", "due_at": clock.now.isoformat(),
              "channels": ["email"]},
        headers={"Authorization": f"Bearer {API_TOKEN}", "X-Request-ID": "req-42"},
    )  # fmt: skip
    assert response.status_code == 422
    await client.get("/no/such/route-7731")
    requests = [line for line in log_lines() if line.get("event") == "request"]
    customer, reminder, unknown = requests
    assert customer["route"] == "/v1/customers/{customer_id}" and customer["status"] == 200
    assert reminder == {
        **reminder,
        "method": "PUT",
        "route": "/v1/reminders/{reminder_id}",
        "status": 422,
        "request_id": "req-42",
        "logger": "reminders.access",
    }
    assert isinstance(reminder["duration_ms"], float)
    assert unknown["route"] is None and unknown["status"] == 404
    raw = "\n".join(orjson.dumps(line).decode() for line in requests)
    for forbidden in ("7731", API_TOKEN, "ada@example.com"):
        assert forbidden not in raw


async def test_a_push_request_is_one_line_its_delivery_line(
    client, clock, publisher, provider, log_lines
):
    """A delivery's line is its request's access line (method, route, status added); a
    refused push, which has no delivery, gets an access line with its 401."""
    await put_customer(client, "cust_push")
    await put_reminder(client, "r:push-line", customer_id="cust_push", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    answered = await push_message(client, message)
    refused = await client.post("/push/reminders", content=b"{}")
    assert refused.status_code == 401
    lines = [line for line in log_lines() if line.get("event") in ("request", "delivery")]
    by_request = {}
    for line in lines:
        by_request.setdefault(line["request_id"], []).append(line)
    [delivery] = by_request[answered.headers["x-request-id"]]
    assert delivery["event"] == "delivery" and delivery["outcome"] == "sent"
    assert (delivery["method"], delivery["route"], delivery["status"]) == (
        "POST",
        "/push/{queue}",
        200,
    )
    [access] = by_request[refused.headers["x-request-id"]]
    assert (access["event"], access["route"], access["status"]) == ("request", "/push/{queue}", 401)


@pytest.mark.parametrize(
    ("log_format", "tty", "json_lines"),
    [("auto", False, True), ("auto", True, False), ("console", False, False), ("json", True, True)],
)
def test_json_off_a_terminal_console_on_one_unless_told(log_format, tty, json_lines):
    """auto: JSON lines when stdout is not a terminal, the console format when it is;
    REMINDERS_LOG_FORMAT=json|console overrides either way."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return tty

    out = Terminal()
    configure_logging("INFO", log_format=log_format, stream=out)
    try:
        import structlog

        structlog.get_logger("reminders.access").info("request", method="GET", status=200)
        # A logger of its own: one configured elsewhere may have been disabled by an earlier
        # test's logging.config call (alembic's fileConfig does that to existing loggers).
        logging.getLogger(f"tests.log_format.{log_format}.{tty}").info("Started server process")
    finally:
        configure_logging("INFO", stream=io.StringIO())
        log_output._stream = None
    first, second = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).splitlines()
    if json_lines:
        assert orjson.loads(first)["method"] == "GET"
        assert orjson.loads(second)["event"] == "Started server process"
    else:
        assert not first.startswith("{") and "request" in first and "method=GET" in first
        assert "Started server process" in second and not second.startswith("{")


async def test_a_terminal_failure_is_an_error_line_with_its_error_class(
    client, clock, publisher, provider, log_lines
):
    """A permanent failure logs at error with error_class; its redelivery is routine (info)."""
    await put_customer(client, "cust_ada", email="ada@example.com")
    await put_reminder(client, "r:terminal", customer_id="cust_ada", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    provider.script.append(PermanentProviderError("mailbox gone", detail_class="smtp_5xx"))
    await push_message(client, message)
    await push_message(client, message)  # the queue redelivers: already terminal
    deliveries = [line for line in log_lines() if line.get("event") == "delivery"]
    assert [(d["outcome"], d["level"]) for d in deliveries] == [
        ("terminal", "error"),
        ("terminal", "info"),
    ]
    assert deliveries[0]["error_class"] == "smtp_5xx"


async def test_a_dead_letter_is_an_error_line_with_its_error_class(
    client, clock, publisher, provider, log_lines
):
    """The delivery that spends the last attempt (3 here) logs dead_lettered at error with
    the failure's class; the queue's redelivery of the dead send is routine (info)."""
    await put_customer(client, "cust_ada", email="ada@example.com")
    await put_reminder(client, "r:dead", customer_id="cust_ada", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    for _ in range(3):
        provider.script.append(TransientProviderError("mailbox busy"))
        await push_message(client, message)
        clock.advance(hours=1)
    await push_message(client, message)  # the queue redelivers: already dead
    deliveries = [line for line in log_lines() if line.get("event") == "delivery"]
    assert [(d["outcome"], d["level"]) for d in deliveries] == [
        ("retry", "warning"),
        ("retry", "warning"),
        ("dead_lettered", "error"),
        ("dead_lettered", "info"),
    ]
    assert deliveries[2]["error_class"] == "transient"
    assert deliveries[2]["ledger_key"] == "r:dead:email"


async def test_a_lost_lease_is_an_error_line_with_its_error_class(
    client, clock, publisher, provider, log_lines
):
    """Worker A is stuck at the provider past its lease while B reclaims and sends: A's
    refused finalize logs lease_lost at error (error_class lease_lost), B's send is info."""
    await put_customer(client, "cust_ada", email="ada@example.com")
    await put_reminder(client, "r:lease", customer_id="cust_ada", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    provider.script = [SendResult("from-B"), SendResult("from-A")]
    held = provider.gate = asyncio.Event()
    worker_a = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    provider.gate = None  # only A's call waits; B's goes straight through
    clock.advance(seconds=61)  # past A's 60 s lease
    answer_b = await push_message(client, message)
    held.set()
    answer_a = await worker_a
    assert (answer_a.json()["outcome"], answer_a.json()["detail"]) == ("busy", "lease lost")
    assert answer_b.json()["outcome"] == "sent"
    lines = log_lines()
    [lost] = [line for line in lines if line.get("event") == "lease_lost"]
    assert (lost["level"], lost["error_class"]) == ("error", "lease_lost")
    assert lost["ledger_key"] == "r:lease:email:scripted"
    assert lost["logger"] == "reminders.receiver"
