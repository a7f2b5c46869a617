"""/admin over HTTP: login, cookie flags, CSRF, the two-step redrive and discards."""

import re

import httpx

from app.services import audit
from tests.support.dead_letters import ADMIN, ADMIN_TOKEN, admin_post, exhaust
from tests.support.flow import get_reminder, push, push_message, put_customer, put_reminder
from tests.support.push import envelope


async def _login(client: httpx.AsyncClient) -> dict[str, str]:
    response = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert response.status_code == 303
    cookie = response.headers["set-cookie"]
    name_value = cookie.split(";", 1)[0]
    return {"Cookie": name_value}


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert match, "no CSRF token on the page"
    return match.group(1)


async def test_admin_page_needs_a_login_and_sets_a_safe_cookie(client):
    """Without a session /admin redirects; a wrong token is refused; the cookie is safe."""
    assert (await client.get("/admin")).headers["location"] == "/admin/login"
    wrong = await client.post("/admin/login", data={"token": "nope"})
    assert wrong.status_code == 401
    right = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    cookie = right.headers["set-cookie"]
    for flag in ("HttpOnly", "Secure", "SameSite=strict", "Path=/admin"):
        assert flag.lower() in cookie.lower()
    assert ADMIN_TOKEN not in cookie
    forged = {"Cookie": "rr_admin=9999999999.deadbeef"}
    assert (await client.get("/admin", headers=forged)).status_code == 303


async def test_overview_shows_the_dead_letter_group_and_redrive_is_two_steps(
    client, clock, publisher, provider
):
    """The page groups by error class; preview publishes nothing, confirm publishes."""
    await exhaust(client, publisher, clock, provider, "r:page")
    headers = await _login(client)
    page = await client.get("/admin", headers=headers)
    assert page.status_code == 200
    assert "smtp_4xx" in page.text and "attempts_exhausted" in page.text
    csrf = _csrf(page.text)

    form = {"target": "group", "reason": "attempts_exhausted", "error_class": "smtp_4xx"}
    no_csrf = await client.post("/admin/redrive/preview", data=form, headers=headers)
    assert no_csrf.status_code == 401
    preview = await client.post(
        "/admin/redrive/preview", data={**form, "csrf": csrf}, headers=headers
    )
    assert preview.status_code == 200
    assert "r:page:email:v1:r1" in preview.text and publisher.messages == []

    done = await client.post("/admin/redrive", data={**form, "csrf": csrf}, headers=headers)
    assert done.status_code == 200 and "Published <strong>1</strong>" in done.text
    [message] = publisher.drain()
    await push_message(client, message)
    assert (await get_reminder(client, "r:page"))["send_records"][0]["state"] == "sent"
    lookup = await client.get("/admin", params={"reminder": "r:page"}, headers=headers)
    assert 'class="state">sent<' in lookup.text


async def test_a_form_id_in_superscript_digits_is_404_not_500(client):
    """``id=²`` passes str.isdigit but is no id: the redrive form answers 404."""
    cookie = await _login(client)
    csrf = _csrf((await client.get("/admin", headers=cookie)).text)
    for target in ("dead_letter", "send"):
        response = await client.post(
            "/admin/redrive/preview",
            data={"csrf": csrf, "target": target, "id": "²"},
            headers=cookie,
        )
        assert response.status_code == 404, response.text


async def test_two_logins_in_one_second_get_different_cookies(client):
    """Each login is its own session, even within the same second (the clock is fixed)."""
    first, second = await _login(client), await _login(client)
    assert first["Cookie"] != second["Cookie"]


async def test_logout_ends_the_session_for_every_copy_of_the_cookie(client):
    """After logout the same cookie value no longer opens the page; other sessions do."""
    kept, ended = await _login(client), await _login(client)
    csrf = _csrf((await client.get("/admin", headers=ended)).text)
    response = await client.post("/admin/logout", data={"csrf": csrf}, headers=ended)
    assert response.status_code == 303
    replayed = await client.get("/admin", headers=ended, follow_redirects=False)
    assert replayed.status_code == 303
    assert replayed.headers["location"] == "/admin/login"
    assert (await client.get("/admin", headers=kept)).status_code == 200


async def _letters(client: httpx.AsyncClient, status: str = "open") -> dict[str, dict]:
    response = await client.get("/v1/dead-letters", params={"status": status}, headers=ADMIN)
    assert response.status_code == 200, response.text
    return {item["reason"]: item for item in response.json()["items"]}


async def test_a_quarantined_letter_no_redrive_can_publish_is_discarded_from_the_page(
    client, clock, publisher, provider, container
):
    """Discard needs the CSRF token; the letter leaves the open set, the gauge and redrive,
    the audit stays clean; an exhausted send's letter and a redrivable one are refused."""
    await exhaust(client, publisher, clock, provider, "r:kept")
    await push(client, envelope("r:never", message_id="m-never"))
    await push(client, {"message_id": "m-bad", "payload": {"v": 9}})
    letters = await _letters(client)
    bad, never = letters["malformed"]["id"], letters["unknown_reminder"]["id"]
    exhausted = letters["attempts_exhausted"]["id"]
    headers = await _login(client)
    page = (await client.get("/admin", headers=headers)).text
    assert f"discard-dead-letter-{bad}" in page and f"discard-dead-letter-{never}" in page
    assert f"discard-dead-letter-{exhausted}" not in page
    csrf = _csrf(page)

    no_csrf = await client.post("/admin/discard", data={"id": str(bad)}, headers=headers)
    assert no_csrf.status_code == 401
    for ident in (bad, never):
        done = await client.post(
            "/admin/discard", data={"id": str(ident), "csrf": csrf}, headers=headers
        )
        assert done.status_code == 200 and "discarded" in done.text
    refused = await client.post(
        "/admin/discard", data={"id": str(exhausted), "csrf": csrf}, headers=headers
    )
    assert refused.status_code == 409 and "redrive it instead" in refused.text

    assert set(await _letters(client)) == {"attempts_exhausted"}
    assert set(await _letters(client, "all")) == {
        "attempts_exhausted",
        "malformed",
        "unknown_reminder",
    }
    metrics = (await client.get("/metrics")).text
    assert 'reminders_dead_letters{reason="unknown_reminder"}' not in metrics
    assert 'reminders_dead_letters{reason="attempts_exhausted"} 1.0' in metrics
    await put_customer(client, "cust_never")
    await put_reminder(client, "r:never", customer_id="cust_never", due_at=clock.now)
    report = await admin_post(client, f"/v1/dead-letters/{never}/redrive")
    assert report["published"] == 0 and "discarded" in report["items"][0]["reason"]
    async with container.engine.connect() as conn:
        assert (await audit.run_audit(conn, now=clock.now)).ok


async def test_a_quarantined_letter_a_redrive_would_publish_is_not_discarded(
    client, clock, publisher, provider
):
    """Once its reminder exists the letter is redrivable: no Discard button, and a 409."""
    await push(client, envelope("r:soon", message_id="m-soon"))
    await put_customer(client, "cust_soon")
    await put_reminder(client, "r:soon", customer_id="cust_soon", due_at=clock.now)
    soon = (await _letters(client))["unknown_reminder"]["id"]
    headers = await _login(client)
    page = (await client.get("/admin", headers=headers)).text
    assert f"discard-dead-letter-{soon}" not in page
    refused = await client.post(
        "/admin/discard", data={"id": str(soon), "csrf": _csrf(page)}, headers=headers
    )
    assert refused.status_code == 409 and "redrivable now" in refused.text
    assert set(await _letters(client)) == {"unknown_reminder"}
