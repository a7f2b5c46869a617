"""Templates: the kinds and their data fields, previews equal to real sends, recipients
checked at registration, and warnings for reminders already past their usefulness."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from app.adapters.rendering import Renderer
from tests.support.flow import API, get_reminder, push_message, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


@pytest.fixture
def strict_kind(container, tmp_path):
    """A ``strict`` kind whose templates read ``data.name`` without a default, searched
    before the built-in ones by both the API and the receiver (one renderer)."""
    folder = tmp_path / "templates" / "strict"
    folder.mkdir(parents=True)
    (folder / "email_subject.txt").write_text("For {{ data.name }}")
    (folder / "email.txt").write_text('Hi {{ data["name"] }}, {{ data.get("note", "") }}')
    renderer = Renderer(
        tmp_path / "templates", unsubscribe_links=container.renderer.unsubscribe_links
    )
    container.renderer = renderer
    container.receiver = dataclasses.replace(container.receiver, renderer=renderer)
    return "strict"


async def _preview(client, kind: str, **body):
    response = await client.post(f"/v1/templates/{kind}/preview", json=body, headers=API)
    assert response.status_code == 200, response.text
    return {message["channel"]: message for message in response.json()["messages"]}


async def test_templates_list_kinds_channels_and_data_fields(client, strict_kind):
    """GET /v1/templates names every kind with its channels, its HTML part and the data
    fields its templates read: required when read without a default."""
    response = await client.get("/v1/templates", headers=API)
    assert response.status_code == 200
    kinds = {item["kind"]: item for item in response.json()["items"]}
    assert set(kinds) == {"expiry", "renewal", "strict", "weekly_digest"}
    digest = kinds["weekly_digest"]
    assert digest["channels"] == ["email", "webhook"] and digest["html"] is True
    assert digest["fields"] == [
        {"name": "items", "required": False},
        {"name": "name", "required": False},
        {"name": "week", "required": False},
    ]
    assert kinds["strict"]["fields"] == [
        {"name": "name", "required": True},
        {"name": "note", "required": False},
    ]


async def test_preview_equals_what_a_send_delivers(client, clock, provider):
    """A preview for a stored customer renders the same email and webhook (recipient, subject,
    text, HTML, unsubscribe headers, body) as the receiver hands the provider."""
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    data = {"name": "Ada", "week": "W33", "items": ["one", "two"]}
    await put_reminder(
        client, "r1", customer_id="c1", due_at=clock.now, channels=("email", "webhook"), data=data
    )
    preview = await _preview(
        client, "weekly_digest", customer_id="c1", data=data, due_at=clock.now.isoformat()
    )
    await sweep(client)
    for message in client._transport.app.state.container.publisher.drain():
        await push_message(client, message)
    sent = {call.message.channel: call.message for call in provider.calls}
    email, webhook = sent["email"], sent["webhook"]
    assert preview["email"]["subject"] == email.subject == "Your weekly digest for W33"
    assert preview["email"]["text"] == email.text
    assert preview["email"]["html"] == email.html and "<li>two</li>" in email.html
    assert preview["email"]["recipient"] == email.recipient == "c1@example.com"
    assert preview["email"]["headers"] == dict(email.headers)
    assert preview["email"]["error_class"] is None
    assert preview["webhook"]["recipient"] == webhook.recipient
    assert {**preview["webhook"]["body"], "reminder_id": "r1"} == dict(webhook.body)


async def test_preview_shows_the_error_a_send_records(client, clock, strict_kind):
    """A template reading a missing field: the preview's error class and message are the
    ones the failed send writes to its ledger row."""
    await put_customer(client, "c1")
    preview = await _preview(client, strict_kind, customer_id="c1", data={}, channels=["email"])
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now, kind=strict_kind)
    await sweep(client)
    for message in client._transport.app.state.container.publisher.drain():
        await push_message(client, message)
    [record] = (await get_reminder(client, "r1"))["send_records"]
    assert record["last_error_class"] == "template_error"
    assert preview["email"]["error_class"] == record["last_error_class"]
    assert preview["email"]["error"] == record["last_error"]
    assert "name" in record["last_error"]
    fine = await _preview(client, strict_kind, customer_id="c1", data={"name": "Ada"})
    assert fine["email"]["subject"] == "For Ada" and fine["email"]["error"] is None


async def test_preview_for_an_inline_customer(client, clock):
    """An inline customer needs no registration; a channel it has no recipient for shows
    no_recipient, as the send would record."""
    body = {"customer": {"email": "x@example.com", "time_zone": "Europe/Paris"}, "data": {}}
    preview = await _preview(client, "renewal", **body, due_at="2026-12-01T23:30:00+00:00")
    assert preview["email"]["recipient"] == "x@example.com"
    assert preview["email"]["subject"] == "Your subscription renews on 2026-12-02"  # Paris date
    assert preview["webhook"]["error_class"] == "no_recipient"
    assert "webhook_url" in preview["webhook"]["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"data": {}}, "customer_id"),
        ({"customer_id": "c1", "customer": {"email": "x@example.com"}}, "customer_id"),
        ({"customer_id": "nobody"}, "customer_id"),
        ({"customer_id": "c1", "channels": ["sms"]}, "channels.0"),
    ],
)
async def test_preview_refuses_an_unusable_request(client, body, field):
    """No customer, two customers, an unknown one or an unknown channel: 422 naming it."""
    await put_customer(client, "c1")
    response = await client.post("/v1/templates/renewal/preview", json=body, headers=API)
    assert response.status_code == 422, response.text
    assert response.json()["fields"][0]["field"] == field


@pytest.mark.parametrize(
    ("customer", "channel", "field"),
    [
        ({}, "webhook", "webhook_url"),
        ({"email": None, "webhook_url": "https://h.example/x"}, "email", "email"),
    ],
)
async def test_registering_a_channel_without_recipient_is_422(
    client, clock, customer, channel, field
):
    """A reminder whose channel the customer has no recipient for is refused at registration
    (not left to fail at send as no_recipient), by the single PUT and the batch alike."""
    await put_customer(client, "c1", **customer)
    body = {
        "customer_id": "c1",
        "kind": "renewal",
        "due_at": clock.now.isoformat(),
        "channels": [channel],
    }
    single = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert single.status_code == 422
    [problem] = single.json()["fields"]
    assert problem["field"] == "channels" and field in problem["message"]
    batch = await client.post(
        "/v1/reminders:batch", json={"items": [{"id": "r1", **body}]}, headers=API
    )
    [result] = batch.json()["results"]
    assert result["status"] == "error" and result["fields"] == single.json()["fields"]
    assert (await client.get("/v1/reminders/r1", headers=API)).status_code == 404


async def test_a_reminder_past_its_usefulness_is_accepted_with_a_warning(client, clock, container):
    """due_at older than the grace (or expires_at past) is registered, and the answer warns
    that its sends will be dropped as expired; a timely reminder has no warning."""
    await put_customer(client, "c1")
    grace = container.receiver.policy.usefulness_grace
    late = await put_reminder(
        client, "late", customer_id="c1", due_at=clock.now - grace - timedelta(seconds=1)
    )
    [warning] = late["warnings"]
    assert warning["code"] == "past_usefulness_window" and warning["field"] == "due_at"
    assert "expired" in warning["message"]
    gone = await put_reminder(
        client,
        "gone",
        customer_id="c1",
        due_at=clock.now - timedelta(hours=2),
        expires_at=(clock.now - timedelta(hours=1)).isoformat(),
    )
    assert [w["field"] for w in gone["warnings"]] == ["expires_at"]
    timely = await put_reminder(client, "ok", customer_id="c1", due_at=clock.now - grace)
    assert timely["warnings"] == []
    body = {"customer_id": "c1", "kind": "renewal", "channels": ["email"]}
    items = [
        {"id": "b-late", **body, "due_at": (clock.now - 2 * grace).isoformat()},
        {"id": "b-ok", **body, "due_at": clock.now.isoformat()},
    ]
    batch = await client.post("/v1/reminders:batch", json={"items": items}, headers=API)
    late_item, ok_item = batch.json()["results"]
    assert late_item["warnings"][0]["code"] == "past_usefulness_window"
    assert "warnings" not in ok_item
