"""Email addresses: stored exactly as given, refused when no server could take them, and the
preview says when only an SMTPUTF8 server can."""

from __future__ import annotations

import pytest

from tests.support.flow import API

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("address", ["x@xn--bcher-kva.de", "a@bücher.de", "ü@example.com"])
async def test_an_address_is_stored_exactly_as_given(client, address):
    """No normalization: punycode stays punycode, Unicode stays Unicode."""
    put = await client.put("/v1/customers/c1", json={"email": address}, headers=API)
    assert put.status_code == 200, put.text
    assert put.json()["email"] == address
    got = await client.get("/v1/customers/c1", headers=API)
    assert got.json()["email"] == address


@pytest.mark.parametrize("address", ["a@bü_cher.de", "a@xn--zz.de", "no-at-sign", "a@-x.de"])
async def test_an_address_no_server_could_take_is_422_naming_email(client, address):
    """Invalid domains (IDNA cannot write them) and malformed addresses are refused."""
    put = await client.put("/v1/customers/c1", json={"email": address}, headers=API)
    assert put.status_code == 422, put.text
    assert [item["field"] for item in put.json()["fields"]] == ["email"]


async def test_the_preview_warns_when_only_an_smtputf8_server_takes_the_address(client):
    """A Unicode local part: the email preview carries a ``recipient_unsupported`` warning;
    an internationalised domain alone needs no warning (IDNA carries it everywhere)."""
    for customer_id, address in (("c1", "ü@example.com"), ("c2", "a@bücher.de")):
        put = await client.put(f"/v1/customers/{customer_id}", json={"email": address}, headers=API)
        assert put.status_code == 200, put.text
    warned = await client.post(
        "/v1/templates/renewal/preview",
        json={"customer_id": "c1", "channels": ["email"]},
        headers=API,
    )
    assert warned.status_code == 200, warned.text
    [message] = warned.json()["messages"]
    assert [warning["code"] for warning in message["warnings"]] == ["recipient_unsupported"]
    assert "SMTPUTF8" in message["warnings"][0]["message"]
    plain = await client.post(
        "/v1/templates/renewal/preview",
        json={"customer_id": "c2", "channels": ["email"]},
        headers=API,
    )
    assert plain.json()["messages"][0]["warnings"] == []
