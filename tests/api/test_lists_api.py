"""Lists: ``GET /v1/reminders`` and ``GET /v1/schedules`` filter, order and page stably."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.support.dead_letters import exhaust
from tests.support.flow import API, push_message, put_customer, put_reminder, sweep
from tests.support.schedules import put_schedule

pytestmark = pytest.mark.anyio
HOUR = timedelta(hours=1)


async def _page(client, path: str, **query) -> dict:
    response = await client.get(path, params=query, headers=API)
    assert response.status_code == 200, response.text
    return response.json()


async def _all_ids(client, path: str, **query) -> list[str]:
    ids, cursor = [], None
    while True:
        page = await _page(client, path, **query, **({"cursor": cursor} if cursor else {}))
        ids += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


@pytest.fixture
async def two_customers(client):
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    await put_customer(client, "c2")


async def test_reminders_filter_by_each_field_in_due_order(client, clock, two_customers):
    """customer_id, state, kind, schedule_id and the due range each narrow the list, which
    comes in (due_at, id) order, equal due times by id."""
    now = clock.now
    await put_reminder(client, "b", customer_id="c1", due_at=now + timedelta(hours=2))
    await put_reminder(client, "a", customer_id="c1", due_at=now + timedelta(hours=2))
    await put_reminder(client, "z", customer_id="c1", due_at=now + timedelta(hours=1))
    await put_reminder(client, "y", customer_id="c2", due_at=now + timedelta(hours=3))
    await put_reminder(client, "x", customer_id="c2", due_at=now, kind="renewal")
    await client.delete("/v1/reminders/y", headers=API)
    await put_customer(client, "c3")
    await put_schedule(client, "s1", expect=201, customer_id="c3", cron="0 * * * *")
    [occurrence, *_] = await _all_ids(client, "/v1/reminders", customer_id="c3")

    assert await _all_ids(client, "/v1/reminders", customer_id="c1") == ["z", "a", "b"]
    assert await _all_ids(client, "/v1/reminders", state="cancelled") == ["y"]
    assert await _all_ids(client, "/v1/reminders", kind="renewal") == ["x"]
    assert (await _all_ids(client, "/v1/reminders", schedule_id="s1"))[0] == occurrence
    window = {"due_after": (now + timedelta(hours=1)).isoformat()}
    window["due_before"] = (now + timedelta(hours=3)).isoformat()
    in_window = await _all_ids(client, "/v1/reminders", customer_id="c1", **window)
    assert in_window == ["z", "a", "b"]
    assert await _all_ids(client, "/v1/reminders", customer_id="c2", **window) == []
    listed = (await _page(client, "/v1/reminders", customer_id="c1", limit=1))["items"][0]
    assert listed["id"] == "z" and "send_records" not in listed


async def test_paging_while_rows_are_inserted_sees_each_existing_row_once(
    client, clock, two_customers
):
    """Pages of 7 over 40 reminders (many sharing a due time) while new reminders land before,
    at and after the cursor: every reminder that existed at the start is seen exactly once,
    and no reminder is seen twice."""
    base = clock.now + timedelta(hours=1)
    existing = [f"r{n:02d}" for n in range(40)]
    for n, reminder_id in enumerate(existing):
        await put_reminder(client, reminder_id, customer_id="c1", due_at=base + (n // 4) * HOUR)
    seen: list[str] = []
    cursor, inserted = None, 0
    while True:
        query = {"customer_id": "c1", "limit": 7} | ({"cursor": cursor} if cursor else {})
        page = await _page(client, "/v1/reminders", **query)
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        last_due = page["items"][-1]["due_at"]
        for offset in (-HOUR, timedelta(0), HOUR):  # before, tied with and after the cursor
            due = datetime.fromisoformat(last_due) + offset
            await put_reminder(client, f"new{inserted:03d}", customer_id="c1", due_at=due)
            inserted += 1
    assert len(seen) == len(set(seen))
    assert sorted(rid for rid in seen if rid in existing) == existing


async def test_limit_defaults_to_50_and_is_capped_at_500(client, clock, two_customers):
    """Without limit a page holds 50; 500 is accepted, 501 and 0 are 422 naming limit."""
    for n in range(51):
        await put_reminder(client, f"r{n:02d}", customer_id="c2", due_at=clock.now)
    page = await _page(client, "/v1/reminders")
    assert len(page["items"]) == 50 and page["next_cursor"]
    assert len((await _page(client, "/v1/reminders", limit=500))["items"]) == 51
    for bad in (501, 0):
        response = await client.get("/v1/reminders", params={"limit": bad}, headers=API)
        assert response.status_code == 422
        assert response.json()["fields"][0]["field"] == "limit"


@pytest.mark.parametrize("path", ["/v1/reminders", "/v1/schedules"])
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("cursor", "²"),
        ("cursor", "1" * 30),
        ("cursor", "abc\x00"),
        ("cursor", "WyJ4Il0"),  # base64 of ["x"]: well-formed, not one of ours
        ("limit", "²"),
        ("limit", "1" * 30),
        ("limit", "5\x00"),
        ("customer_id", "c\x00"),
        ("customer_id", "²"),
        ("customer_id", "1" * 300),
    ],
)
async def test_hostile_filters_and_cursors_are_a_clear_422(client, path, name, value):
    """A bad cursor, limit or filter answers 422 naming the parameter, never 500."""
    response = await client.get(path, params={name: value}, headers=API)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_input"
    assert [item["field"] for item in body["fields"]] == [name]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("state", "²"),
        ("due_after", "1" * 30),
        ("due_before", "2026-01-01T00:00\x00"),
        ("kind", "Bad Kind"),
        ("schedule_id", "s\x00"),
        ("delivery", "done"),
    ],
)
async def test_hostile_reminder_filters_are_a_clear_422(client, name, value):
    """Each reminder filter refuses an unusable value with 422 naming it."""
    response = await client.get("/v1/reminders", params={name: value}, headers=API)
    assert response.status_code == 422, response.text
    assert [item["field"] for item in response.json()["fields"]] == [name]


async def test_a_schedules_cursor_is_refused_by_the_reminders_list(client, two_customers):
    """Cursors are per list: the other list's cursor is a 422, not a wrong page."""
    for n in range(3):
        await put_schedule(client, f"s{n}", expect=201, customer_id="c2", cron="0 9 * * 1")
    cursor = (await _page(client, "/v1/schedules", limit=1))["next_cursor"]
    response = await client.get("/v1/reminders", params={"cursor": cursor}, headers=API)
    assert response.status_code == 422
    assert response.json()["fields"][0]["field"] == "cursor"


async def test_schedules_list_by_customer_in_id_order_without_deleted(client, two_customers):
    """GET /v1/schedules pages a customer's schedules by id; deleted ones are not listed."""
    for schedule_id, customer_id in [("s3", "c1"), ("s1", "c1"), ("s2", "c2"), ("s4", "c1")]:
        await put_schedule(
            client, schedule_id, expect=201, customer_id=customer_id, cron="0 9 * * 1"
        )
    await client.delete("/v1/schedules/s4", headers=API)
    assert await _all_ids(client, "/v1/schedules", customer_id="c1", limit=1) == ["s1", "s3"]
    assert await _all_ids(client, "/v1/schedules") == ["s1", "s2", "s3"]
    page = await _page(client, "/v1/schedules", customer_id="c2")
    assert page["items"][0]["kind"] == "weekly_digest" and page["next_cursor"] is None


async def test_lists_require_the_api_token(client):
    """Both lists are behind the API token like the rest of /v1."""
    for path in ("/v1/reminders", "/v1/schedules"):
        assert (await client.get(path)).status_code == 401


async def test_reminders_filter_by_delivery_summary(client, clock, publisher, provider):
    """?delivery= lists done reminders by what their channels came to: the dead-lettered one
    under undelivered, the accepted one under delivered, open ones under neither."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    await put_customer(client, "c9")
    await put_reminder(client, "r:ok", customer_id="c9", due_at=clock.now)
    await sweep(client)
    for message in publisher.drain():
        await push_message(client, message)
    await put_reminder(client, "r:later", customer_id="c9", due_at=clock.now + HOUR * 48)
    assert await _all_ids(client, "/v1/reminders", delivery="undelivered") == ["r:dead"]
    assert await _all_ids(client, "/v1/reminders", delivery="delivered") == ["r:ok"]
    assert await _all_ids(client, "/v1/reminders", delivery="withheld") == []
    both = await _all_ids(client, "/v1/reminders", state="done", delivery="undelivered")
    assert both == ["r:dead"]
    [listed] = (await _page(client, "/v1/reminders", delivery="undelivered"))["items"]
    assert (listed["state"], listed["delivery"]) == ("done", "undelivered")
