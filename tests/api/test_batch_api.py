"""Bulk registration: every item handled as its own PUT, one result each, never all-or-nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.api.batch import MAX_BATCH_BYTES, MAX_BATCH_ITEMS
from tests.support.flow import API, get_reminder, push_message, put_customer, sweep

pytestmark = pytest.mark.anyio


def item(clock, reminder_id: str, **fields: Any) -> dict[str, Any]:
    """A valid reminders-batch item for customer c1, due in one hour."""
    return {
        "id": reminder_id,
        "customer_id": "c1",
        "kind": "weekly_digest",
        "due_at": (clock.now + timedelta(hours=1)).isoformat(),
        "channels": ["email"],
        **fields,
    }


async def batch(client, noun: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    response = await client.post(f"/v1/{noun}:batch", json={"items": items}, headers=API)
    assert response.status_code == 200, response.text
    return response.json()


def statuses(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(result["id"], result["status"]) for result in answer["results"]]


@pytest.fixture
async def customer(client):
    return await put_customer(client, "c1")


async def test_one_bad_item_fails_alone_with_its_field_errors(client, clock, customer):
    """Valid items are stored; each bad one gets the error code and fields its PUT would."""
    answer = await batch(
        client,
        "reminders",
        [
            item(clock, "r1"),
            item(clock, "r2", due_at="next tuesday"),
            item(clock, "r3", customer_id="nobody"),
            item(clock, "r4", kind="no_such_template"),
            item(clock, "r1", data={"again": True}),
            {"id": "r5", "customer_id": "c1"},
            "not an object",
            item(clock, "r6"),
        ],
    )
    assert statuses(answer) == [
        ("r1", "created"),
        ("r2", "error"),
        ("r3", "error"),
        ("r4", "error"),
        ("r1", "error"),
        ("r5", "error"),
        ("", "error"),
        ("r6", "created"),
    ]
    results = answer["results"]
    assert results[1]["error"] == "invalid_input"
    assert [f["field"] for f in results[1]["fields"]] == ["due_at"]
    assert results[2]["fields"] == [
        {"field": "customer_id", "message": "customer_id: no customer 'nobody'"}
    ]
    assert results[3]["fields"][0]["field"] == "kind"
    assert "more than once" in results[4]["fields"][0]["message"]
    assert {f["field"] for f in results[5]["fields"]} == {"kind", "due_at", "channels"}
    assert "error" not in results[0] and "fields" not in results[0]
    assert answer["counts"] == {"created": 2, "updated": 0, "unchanged": 0, "error": 6}
    assert (await get_reminder(client, "r1"))["data"] == {}
    for missing in ("r2", "r3", "r4", "r5"):
        assert (await client.get(f"/v1/reminders/{missing}", headers=API)).status_code == 404


async def test_items_follow_the_put_rules_step_for_step(client, clock, publisher, customer):
    """The same sequence of bodies through PUT and through the batch leaves equal rows and
    equal outcomes: create, same body, data change, reschedule, cancel + revive, done."""
    due, later = ((clock.now + timedelta(hours=h)).isoformat() for h in (1, 2))
    steps = [{"due_at": due}, {"due_at": due}, {"due_at": due, "data": {"week": 33}}]
    steps.append({"data": {"week": 33}, "due_at": later})
    put_codes, batch_statuses = [], []
    for fields in steps:
        body = item(clock, "unused", **fields)
        body.pop("id")
        response = await client.put("/v1/reminders/by-put", json=body, headers=API)
        put_codes.append(response.status_code)
        answer = await batch(client, "reminders", [item(clock, "by-batch", **fields)])
        batch_statuses.append(answer["results"][0]["status"])
        clock.advance(minutes=1)
    assert put_codes == [201, 200, 200, 200]
    assert batch_statuses == ["created", "unchanged", "updated", "updated"]

    for reminder_id in ("by-put", "by-batch"):
        await client.delete(f"/v1/reminders/{reminder_id}", headers=API)
    revived = await batch(
        client, "reminders", [item(clock, "by-batch", due_at=later, data={"week": 33})]
    )
    assert revived["results"][0]["status"] == "updated"
    body = item(clock, "x", due_at=later, data={"week": 33})
    body.pop("id")
    await client.put("/v1/reminders/by-put", json=body, headers=API)

    by_put, by_batch = await get_reminder(client, "by-put"), await get_reminder(client, "by-batch")
    comparable = ("state", "schedule_version", "due_at", "data", "channels", "cancelled_at")
    assert {k: by_put[k] for k in comparable} == {k: by_batch[k] for k in comparable}
    assert (by_batch["state"], by_batch["schedule_version"]) == ("scheduled", 3)

    clock.advance(hours=3)
    await sweep(client)
    for message in publisher.drain():
        await push_message(client, message)
    conflict = await batch(client, "reminders", [item(clock, "by-batch", data={"new": 1})])
    assert conflict["results"][0]["error"] == "conflict"
    body.pop("due_at")
    put = await client.put(
        "/v1/reminders/by-put", json={**body, "due_at": later, "data": {"new": 1}}, headers=API
    )
    assert put.status_code == 409


async def test_customers_batch_applies_the_customer_rules(client, clock):
    """Created, unchanged and updated customers; a half quiet-hours pair is that item's error."""
    first = await batch(
        client,
        "customers",
        [
            {"id": "c1", "email": "c1@example.com"},
            {"id": "c2", "email": "c2@example.com", "quiet_hours_start": "22:00"},
            {"id": "c3", "email": "not-an-address"},
        ],
    )
    assert statuses(first) == [("c1", "created"), ("c2", "error"), ("c3", "error")]
    assert first["results"][1]["fields"][0]["field"] == "quiet_hours_end"
    assert first["results"][2]["fields"][0]["field"] == "email"
    clock.advance(minutes=1)
    second = await batch(
        client,
        "customers",
        [{"id": "c1", "email": "c1@example.com"}, {"id": "c1b", "unsubscribed": True}],
    )
    assert statuses(second) == [("c1", "unchanged"), ("c1b", "created")]
    third = await batch(client, "customers", [{"id": "c1", "email": "new@example.com"}])
    assert statuses(third) == [("c1", "updated")]
    stored = (await client.get("/v1/customers/c1", headers=API)).json()
    assert stored["email"] == "new@example.com"
    assert (await client.get("/v1/customers/c1b", headers=API)).json()["unsubscribed"] is True
    assert (await client.get("/v1/customers/c2", headers=API)).status_code == 404


async def test_the_caller_is_authenticated_before_the_body_is_read(client):
    """Without the API token the answer is 401 and not one chunk of the body was pulled."""
    pulled = []

    async def body():
        pulled.append(1)
        yield b'{"items": []}'

    for noun in ("customers", "reminders"):
        response = await client.post(f"/v1/{noun}:batch", content=body())
        assert response.status_code == 401
    assert pulled == []


async def test_oversized_and_overlong_batches_are_refused_whole(client, clock, customer):
    """Over the byte cap: 413 before parsing; over 1,000 items or not a batch: 422."""
    too_big = {"content-length": str(MAX_BATCH_BYTES + 1), **API}
    response = await client.post("/v1/reminders:batch", content=b"{}", headers=too_big)
    assert response.status_code == 413
    items = [item(clock, f"r{n}") for n in range(MAX_BATCH_ITEMS + 1)]
    response = await client.post("/v1/reminders:batch", json={"items": items}, headers=API)
    assert response.status_code == 422 and response.json()["fields"][0]["field"] == "items"
    for bad in (b"[", b"[]", b'{"items": []}'):
        response = await client.post("/v1/reminders:batch", content=bad, headers=API)
        assert response.status_code == 422
    assert (await client.get("/v1/reminders/r0", headers=API)).status_code == 404


async def test_a_full_batch_of_1000_registers_every_item(client, clock, customer):
    """1,000 new items: 1,000 created; the same batch again: 1,000 unchanged."""
    items = [item(clock, f"bulk:{n:04}") for n in range(MAX_BATCH_ITEMS)]
    assert (await batch(client, "reminders", items))["counts"]["created"] == MAX_BATCH_ITEMS
    assert (await batch(client, "reminders", items))["counts"]["unchanged"] == MAX_BATCH_ITEMS


async def test_openapi_documents_both_batch_bodies(client):
    """The batch routes read their body themselves; the schema still shows it, as named
    components (CustomerBatch of CustomerItem, ReminderBatch of ReminderItem)."""
    spec = (await client.get("/openapi.json")).json()
    components = spec["components"]["schemas"]
    for noun, required in (("customers", "id"), ("reminders", "due_at")):
        body = spec["paths"][f"/v1/{noun}:batch"]["post"]["requestBody"]
        ref = body["content"]["application/json"]["schema"]["$ref"]
        name = noun[:-1].capitalize()
        assert ref == f"#/components/schemas/{name}Batch"
        items = components[f"{name}Batch"]["properties"]["items"]
        assert items["items"] == {"$ref": f"#/components/schemas/{name}Item"}
        assert required in components[f"{name}Item"]["required"]
        assert items["maxItems"] == MAX_BATCH_ITEMS
