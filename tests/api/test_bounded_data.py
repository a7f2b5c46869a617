"""``data`` is bounded (depth and size) by one validator on every route that parses it, no JSON
body of any route answers 500 however deep or wide, and rows stored before the bound stay
readable, listable and cancellable."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import insert

from app.adapters.rendering import Renderer
from app.api.batch import item_validator
from app.db.tables import reminders
from tests.support.flow import API, put_customer
from tests.support.push import signed

pytestmark = pytest.mark.anyio

ADMIN = {"Authorization": "Bearer test-admin-token-c4a8e2f6b0d3917a5e2c4b"}
DUE = "2026-08-20T09:00:00Z"
REMINDER = {"customer_id": "c1", "kind": "renewal", "channels": ["webhook"], "due_at": DUE}


def nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` containers deep: ``{"a": {"a": … 1}}``."""
    value: Any = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return {"a": value}


@pytest.fixture
async def customer(client):
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/r")


def _fields(response) -> list[str]:
    return [item["field"] for item in response.json().get("fields", [])]


async def test_data_32_deep_is_accepted_and_33_is_422_naming_data(client, customer):
    """The depth limit is 32 containers, counted from data itself."""
    ok = await client.put("/v1/reminders/r1", json={**REMINDER, "data": nested(32)}, headers=API)
    assert ok.status_code == 201, ok.text
    deep = await client.put("/v1/reminders/r2", json={**REMINDER, "data": nested(33)}, headers=API)
    assert deep.status_code == 422, deep.text
    assert _fields(deep) == ["data"]
    assert "32" in deep.json()["fields"][0]["message"]


async def test_deep_data_is_refused_by_the_batch_preview_and_schedules_alike(client, customer):
    """Batch items, previews and schedules go through the same validator (422 naming data)."""
    batch = await client.post(
        "/v1/reminders:batch",
        json={"items": [{"id": "r1", **REMINDER, "data": nested(600)}]},
        headers=API,
    )
    assert batch.status_code == 200, batch.text
    [result] = batch.json()["results"]
    assert result["status"] == "error"
    assert [item["field"] for item in result["fields"]] == ["data"]
    preview = await client.post(
        "/v1/templates/renewal/preview",
        json={"customer_id": "c1", "data": nested(600)},
        headers=API,
    )
    assert preview.status_code == 422, preview.text
    assert _fields(preview) == ["data"]
    schedule = {
        "customer_id": "c1",
        "kind": "renewal",
        "channels": ["webhook"],
        "rrule": "FREQ=WEEKLY",
        "local_time": "09:00",
        "data": nested(600),
    }
    answer = await client.put("/v1/schedules/s1", json=schedule, headers=API)
    assert answer.status_code == 422, answer.text
    assert "data" in _fields(answer)


async def test_wide_data_is_422_naming_data(client, customer):
    """Data over the size limit (many keys) is refused naming data."""
    wide = {f"k{index}": index for index in range(5000)}
    response = await client.put("/v1/reminders/r1", json={**REMINDER, "data": wide}, headers=API)
    assert response.status_code == 422, response.text
    assert _fields(response) == ["data"]


def _documents() -> dict[str, bytes]:
    # Each under the 64 KB body cap of the API routes, so the parser, not the cap, meets it.
    deep_object = '{"data": ' + '{"a": ' * 9000 + "1" + "}" * 9000 + "}"
    deep_array = '{"items": ' + "[" * 25000 + "]" * 25000 + "}"
    wide_object = json.dumps({"data": {f"k{index}": 0 for index in range(5000)}})
    wide_array = json.dumps({"items": [0] * 25000})
    documents = {
        "deep_object": deep_object,
        "deep_array": deep_array,
        "wide_object": wide_object,
        "wide_array": wide_array,
    }
    return {name: text.encode() for name, text in documents.items()}


def _json_routes(app) -> list[tuple[str, str, list]]:
    spec = app.openapi()
    routes = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if "application/json" in operation.get("requestBody", {}).get("content", {}):
                routes.append((method, path, operation.get("security") or []))
    return routes


_CREDENTIALS = {"ApiToken": API, "AdminToken": ADMIN}


async def test_every_json_route_answers_deep_and_wide_documents_without_a_500(client, customer):
    """A sweep of every route that takes JSON: deep and wide documents are 4xx, never 5xx."""
    routes = _json_routes(client._transport.app)
    assert len(routes) >= 8, routes
    for method, path, security in routes:
        url = path.replace("{queue}", "reminders").replace("{kind}", "renewal")
        url = url.replace("{customer_id}", "c9").replace("{reminder_id}", "r9")
        url = url.replace("{schedule_id}", "s9")
        for name, body in _documents().items():
            if url.startswith("/push/"):
                raw, headers = signed(body)
            else:
                raw, headers = body, {"content-type": "application/json"}
                for scheme in security:
                    headers |= _CREDENTIALS[next(iter(scheme))]
            response = await client.request(method.upper(), url, content=raw, headers=headers)
            assert response.status_code < 500, (method, url, name, response.text[:300])


async def _store_deep_reminder(engine, depth: int) -> None:
    """A row as a batch stored it before the limit existed (written by SQL)."""
    now = datetime(2026, 8, 1, tzinfo=UTC)
    async with engine.begin() as conn:
        await conn.execute(
            insert(reminders).values(
                id="deep",
                customer_id="c1",
                kind="renewal",
                due_at=datetime(2026, 8, 20, 9, tzinfo=UTC),
                channels=["webhook"],
                data=nested(depth),
                state="scheduled",
                schedule_version=1,
                created_at=now,
                updated_at=now,
            )
        )


async def test_a_row_stored_600_deep_before_the_limit_is_readable_listable_cancellable(
    client, container, customer
):
    """Reading, listing and cancelling an over-deep stored row all answer 200."""
    await _store_deep_reminder(container.engine, 600)
    shown = await client.get("/v1/reminders/deep", headers=API)
    assert shown.status_code == 200, shown.text[:300]
    assert shown.json()["data"]  # shown, cut at the limit
    listed = await client.get("/v1/reminders", headers=API)
    assert listed.status_code == 200, listed.text[:300]
    assert [item["id"] for item in listed.json()["items"]] == ["deep"]
    cancelled = await client.delete("/v1/reminders/deep", headers=API)
    assert cancelled.status_code == 200, cancelled.text[:300]
    assert cancelled.json()["state"] == "cancelled"


def test_an_import_line_with_deep_data_is_refused_naming_data():
    """``reminders import`` validates its lines with the batch's validator: the same refusal."""
    validate = item_validator(Renderer().knows_kind)
    line = {"id": "r1", **REMINDER, "data": nested(600)}
    valid, refused = validate("reminder", [line])
    assert valid == []
    assert [problem.field for problem in refused[0].fields] == ["data"]
