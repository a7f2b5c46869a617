"""/admin/suppressions: the list with its rates, add and lift (a complaint needs force)."""

from __future__ import annotations

from app.db.suppressions import DbSuppressionList
from app.domain.suppression import Suppression, SuppressionReason
from tests.api.test_admin_page import _csrf, _login


async def test_the_page_lists_adds_and_lifts(client, container):
    """A logged-in operator sees the list and the rates, adds an address, lifts it; a
    complaint is kept until the force box is ticked; without CSRF nothing changes."""
    await DbSuppressionList(container.engine, container.receiver.ledger).suppress(
        Suppression("c@example.com", SuppressionReason.COMPLAINT, source="ses"),
        now=container.clock(),
    )
    assert (await client.get("/admin/suppressions")).status_code == 303
    headers = await _login(client)
    page = await client.get("/admin/suppressions", headers=headers)
    assert page.status_code == 200 and "c@example.com" in page.text and "bounce rate" in page.text
    csrf = _csrf(page.text)
    forged = await client.post(
        "/admin/suppressions/add", data={"email": "x@Example.com"}, headers=headers
    )
    assert forged.status_code == 401
    added = await client.post(
        "/admin/suppressions/add", data={"email": "x@Example.com", "csrf": csrf}, headers=headers
    )
    assert added.status_code == 200
    listed = await client.get("/admin/suppressions?reason=manual", headers=headers)
    assert "x@example.com" in listed.text and "c@example.com" not in listed.text
    kept = await client.post(
        "/admin/suppressions/lift", data={"email": "c@example.com", "csrf": csrf}, headers=headers
    )
    assert kept.status_code == 409 and "force" in kept.text
    lifted = await client.post(
        "/admin/suppressions/lift",
        data={"email": "c@example.com", "csrf": csrf, "force": "on"},
        headers=headers,
    )
    assert lifted.status_code == 200
    assert "c@example.com" not in (await client.get("/admin/suppressions", headers=headers)).text
