"""OpenTelemetry tracing (the `otel` extra): a reminder's trace runs from the sweep through
the queue message to the receiver and the provider call; off, nothing changes."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterator

import pytest
from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from app.container import build_container
from app.main import create_app
from app.observability.metrics import instrument_providers
from app.observability.tracing import disable_tracing, enable_tracing
from tests.conftest import make_settings
from tests.support.flow import push, push_message, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test, its spans kept in memory; off again afterwards."""
    exporter = InMemorySpanExporter()
    enable_tracing(exporter=exporter)
    yield exporter
    disable_tracing()
    for instrumentor in (AsyncPGInstrumentor(), AioHttpClientInstrumentor()):
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


def named(exporter: InMemorySpanExporter, name: str) -> list:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def send_one(client, clock, publisher):
    """A due reminder swept and its one message pushed; the message and the answer."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    return message, (await push_message(client, message)).json()


async def test_a_reminder_is_one_trace_from_enqueue_to_the_provider_call(
    client, container, clock, publisher, provider, spans
):
    """enqueue (a root linked to the sweep) → deliver (its child, across the queue, with the
    outcome) → provider.send (the deliver span's child)."""
    container.receiver = dataclasses.replace(
        container.receiver, providers=instrument_providers({"email": provider})
    )
    message, answer = await send_one(client, clock, publisher)
    assert answer["outcome"] == "sent"
    assert message.payload["traceparent"].startswith("00-")
    [sweep_span] = named(spans, "reminders.sweep")
    [enqueue] = named(spans, "reminders.enqueue")
    [deliver] = named(spans, "reminders.deliver")
    [send] = named(spans, "reminders.provider.send")
    assert enqueue.parent is None and enqueue.attributes["reminder.id"] == "r1"
    assert [link.context.span_id for link in enqueue.links] == [sweep_span.context.span_id]
    assert deliver.context.trace_id == enqueue.context.trace_id
    assert deliver.parent.span_id == enqueue.context.span_id
    assert deliver.attributes["reminders.outcome"] == "sent"
    assert deliver.attributes["messaging.message.id"] == message.message_id
    assert send.parent.span_id == deliver.context.span_id
    assert send.attributes["reminders.provider"] == "scripted"


async def test_a_redelivery_continues_the_same_trace(client, clock, publisher, spans):
    """The duplicate push of the same message is another deliver span in the same trace."""
    message, _ = await send_one(client, clock, publisher)
    assert (await push_message(client, message)).json()["outcome"] == "duplicate"
    first, again = named(spans, "reminders.deliver")
    assert first.context.trace_id == again.context.trace_id
    assert again.attributes["reminders.outcome"] == "duplicate"


@pytest.mark.parametrize("traceparent", ["garbage", "00-" + "f" * 5000, 42])
async def test_a_traceparent_that_is_not_one_never_stops_a_delivery(
    client, clock, publisher, spans, traceparent
):
    """Unusable trace context in a payload: delivered as usual, in a trace of its own."""
    await put_customer(client, "c1")
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    payload = {"v": 1, "reminder_id": "r1", "channel": "email", "schedule_version": 1}
    envelope = {"message_id": "m-1", "payload": payload | {"traceparent": traceparent}}
    answer = await push(client, envelope | {"attempt": 1})
    assert answer.json()["outcome"] == "sent"
    [deliver] = named(spans, "reminders.deliver")
    assert deliver.parent is None


async def test_off_by_default_payloads_and_spans_stay_as_they_were(client, clock, publisher):
    """Without tracing the message carries ids only, as before the extra existed."""
    message, answer = await send_one(client, clock, publisher)
    assert answer["outcome"] == "sent"
    assert set(message.payload) == {"v", "reminder_id", "channel", "schedule_version"}


async def test_enabled_settings_instrument_the_api_and_the_database(
    clean_database_url, tmp_path, clock, publisher, spans
):
    """REMINDERS_OTEL_ENABLED: server spans per API request (by route template) and a span
    per SQL statement, from the OpenTelemetry instrumentation packages."""
    import httpx

    settings = make_settings(clean_database_url, tmp_path, otel_enabled=True)
    container = build_container(settings, clock=clock, publisher=publisher)
    try:
        app = create_app(container=container)
        app.state.container = container
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            await put_customer(http, "c1")
            finished = spans.get_finished_spans()
            # Deliveries too: traced, they take the middleware (no direct entry, push_entry.py).
            assert (await push(http, {"message_id": "m1", "payload": {"v": 1}})).is_success
    finally:
        await container.aclose()
    server = [
        s for s in finished if s.attributes.get("http.route") == "/v1/customers/{customer_id}"
    ]
    assert server, [s.name for s in finished]
    delivered = spans.get_finished_spans()
    assert [s for s in delivered if s.attributes.get("http.route") == "/push/{queue}"], [
        (s.name, dict(s.attributes)) for s in delivered
    ]
    statements = [
        s for s in finished if "db.system" in s.attributes or "db.system.name" in s.attributes
    ]
    assert statements and all(s.context.trace_id == server[0].context.trace_id for s in statements)


def test_enabled_without_the_extra_is_a_configuration_error(monkeypatch, tmp_path):
    """REMINDERS_OTEL_ENABLED without OpenTelemetry installed: the start names the extra."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        # The extra is the SDK and its exporter (FastAPI itself installs opentelemetry-api).
        lambda name, *a: None if name.startswith("opentelemetry.") else real(name, *a),
    )
    with pytest.raises(ValidationError, match=r"pip install 'reminder-relay\[otel\]'"):
        make_settings("sqlite+aiosqlite:///x.db", tmp_path, otel_enabled=True)
