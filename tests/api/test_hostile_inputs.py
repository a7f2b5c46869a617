"""Inputs that once answered 500: each gets a clear, documented 4xx on both databases."""

from __future__ import annotations

import pytest

from tests.support.flow import API, put_customer

pytestmark = pytest.mark.anyio

ADMIN = {"Authorization": "Bearer test-admin-token-c4a8e2f6b0d3917a5e2c4b"}
REMINDER = {"customer_id": "c1", "kind": "renewal", "channels": ["webhook"]}
DUE = "2026-08-20T09:00:00Z"


@pytest.fixture
async def customer(client):
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/r")


def _json(raw: str) -> dict[str, str]:
    return {"content-type": "application/json", **API}


@pytest.mark.parametrize(
    ("due_at", "field"),
    [
        ("9999-12-31T23:59:59-14:00", "due_at"),  # past year 9999 in UTC
        ("0001-01-01T00:00:00+14:00", "due_at"),  # before year 1 in UTC
    ],
)
async def test_a_due_at_outside_the_representable_range_is_422(client, customer, due_at, field):
    """A due_at that cannot be converted to UTC names the field instead of crashing."""
    body = {**REMINDER, "due_at": due_at}
    response = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert response.status_code == 422, response.text
    assert field in [item["field"] for item in response.json()["fields"]]


@pytest.mark.parametrize(
    "data",
    [
        '{"text": "\\ud800"}',  # a lone surrogate: valid JSON, not encodable text
        '{"amount": NaN}',  # Python's json accepts it; PostgreSQL's json does not
        '{"amount": Infinity}',
        '{"text": "a\\u0000b"}',  # NUL: PostgreSQL text and jsonb refuse it
    ],
)
async def test_data_that_no_database_can_store_is_422(client, customer, data):
    """Unstorable values in data are refused naming ``data``."""
    raw = '{"customer_id": "c1", "kind": "renewal", "channels": ["webhook"], '
    raw += f'"due_at": "{DUE}", "data": {data}}}'
    response = await client.put("/v1/reminders/r1", content=raw, headers=_json(raw))
    assert response.status_code == 422, response.text
    assert "data" in [item["field"] for item in response.json()["fields"]]


async def test_a_nul_in_an_id_or_text_field_is_422(client, customer):
    """NUL never reaches the database (PostgreSQL refuses it in text)."""
    body = {**REMINDER, "customer_id": "c\u00001", "due_at": DUE}
    response = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert response.status_code == 422, response.text
    assert "customer_id" in [item["field"] for item in response.json()["fields"]]
    response = await client.put(
        "/v1/customers/c2", json={"email": "a@example.com", "time_zone": "UTC\u0000"}, headers=API
    )
    assert response.status_code == 422, response.text


async def test_a_webhook_url_longer_than_the_column_is_422(client):
    """webhook_url is at most 2,048 characters (the column), refused naming the field."""
    url = "https://hooks.example.com/" + "a" * 2100
    response = await client.put("/v1/customers/c1", json={"webhook_url": url}, headers=API)
    assert response.status_code == 422, response.text
    assert "webhook_url" in [item["field"] for item in response.json()["fields"]]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/dead-letters", {"cursor": "²"}),
        ("/v1/dead-letters", {"cursor": "1" * 30}),
        ("/v1/sends", {"cursor": "²"}),
        ("/v1/sends", {"cursor": "9" * 30}),
        ("/v1/dead-letters", {"older_than": "99999999999d"}),
        ("/v1/dead-letters", {"newer_than": "3000000d"}),
        ("/v1/dead-letters", {"queue": "a\u0000b"}),
        ("/v1/dead-letters", {"reminder_id": "a\u0000b"}),
        ("/v1/sends", {"channel": "a\u0000b"}),
        ("/v1/dead-letters/2147483648", {}),
        ("/v1/dead-letters/9223372036854775808", {}),
        ("/v1/dead-letters/99999999999999999999", {}),
    ],
)
async def test_hostile_operator_queries_are_4xx(client, path, params):
    """Garbled cursors, absurd durations, NUL filters and huge ids: 4xx, never 500."""
    response = await client.get(path, params=params, headers=ADMIN)
    assert 400 <= response.status_code < 500, response.text


@pytest.mark.parametrize(
    "path",
    ["/v1/dead-letters/9223372036854775808/redrive", "/v1/sends/9223372036854775808/redrive"],
)
async def test_redriving_an_id_beyond_the_column_is_422(client, path):
    """An id past the integer column is refused naming it, not passed to the database."""
    response = await client.post(path, headers=ADMIN)
    assert response.status_code == 422, response.text


@pytest.mark.parametrize("cookie", ["².x", "9" * 5000 + ".abc", "1.²", "-1.x"])
async def test_a_garbled_admin_cookie_is_a_login_redirect(client, cookie):
    """An unauthenticated, malformed session cookie leads to the login page, not a 500."""
    raw_cookie = f"rr_admin={cookie}".encode()  # as sent on the wire, UTF-8 and all
    response = await client.get("/admin", headers={"cookie": raw_cookie}, follow_redirects=False)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/admin/login"
