"""/admin over HTTP: login, cookie flags, CSRF, and the two-step redrive."""

import re

import httpx

from tests.support.dead_letters import ADMIN_TOKEN, exhaust
from tests.support.flow import get_reminder, push_message


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
