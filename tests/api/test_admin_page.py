"""/admin over HTTP: login, cookie flags, CSRF, the two-step redrive and discards."""

import re

import httpx
import pytest

from app.domain.ledger import Claimant
from app.services import audit
from tests.integration.test_leases import LEASE, message
from tests.integration.test_send_attempts import KEY, plant_double
from tests.support.dead_letters import ADMIN, ADMIN_TOKEN, admin_post, exhaust, publish_reminder
from tests.support.flow import get_reminder, push, push_message, put_customer, put_reminder, scrape
from tests.support.ledger_states import NOW
from tests.support.push import envelope

__all__ = ["message"]


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
    metrics = await scrape(client)
    # Discarded letters are no longer open: their series reads zero (every reason is exported).
    assert 'reminders_dead_letters{reason="unknown_reminder"} 0.0' in metrics
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


async def _send(client, publisher, clock, reminder_id: str) -> None:
    message = await publish_reminder(client, publisher, clock, reminder_id)
    assert (await push_message(client, message)).json()["outcome"] == "sent"


def _sends_listed(html: str) -> list[str]:
    return re.findall(r'data-send="(\d+)"', html)


async def test_the_live_region_charts_outcomes_per_hour_and_pages_through_sends(
    client, clock, publisher, provider
):
    """The chart has one bar per hour with sends in it; recent sends come newest first, a
    page at a time, and the Older link carries the cursor to the rest."""
    await _send(client, publisher, clock, "r:one")
    clock.advance(hours=2)
    await _send(client, publisher, clock, "r:two")
    await _send(client, publisher, clock, "r:three")
    headers = await _login(client)
    live = await client.get("/admin/live", params={"n": 2}, headers=headers)
    assert live.status_code == 200 and "<html" not in live.text
    bars = re.findall(r'data-outcome="(\w+)" data-count="(\d+)"', live.text)
    assert bars == [("sent", "1"), ("sent", "2")]
    first = _sends_listed(live.text)
    assert len(first) == 2 and int(first[0]) > int(first[1])
    older = re.search(r'href="([^"]+)" data-test="sends-next"', live.text)
    assert older is not None
    rest = await client.get(older.group(1).replace("&amp;", "&"), headers=headers)
    assert rest.status_code == 200
    assert _sends_listed(rest.text.split('id="recent-sends"')[1])[0] == str(int(first[1]) - 1)
    assert 'data-test="sends-first"' in rest.text


async def test_hostile_paging_values_are_a_clear_4xx(client):
    """Cursors that are not ids and page sizes out of range answer 422, never 500."""
    headers = await _login(client)
    for params in (
        {"sends": "abc"},
        {"letters": "²"},
        {"sends": "-1"},
        {"letters": "9" * 30},
        {"sends": "1 OR 1=1"},
        {"n": "0"},
        {"n": "101"},
        {"n": "x"},
    ):
        for path in ("/admin", "/admin/live"):
            response = await client.get(path, params=params, headers=headers)
            assert response.status_code == 422, (path, params, response.text)


async def test_the_lookup_finds_reminders_by_customer_id_or_email(
    client, clock, publisher, provider
):
    """An id opens the reminder; a customer id or email lists that customer's reminders."""
    await put_customer(client, "cust_find", email="Find.Me@example.com")
    for rid in ("r:find-1", "r:find-2"):
        await put_reminder(client, rid, customer_id="cust_find", due_at=clock.now)
    headers = await _login(client)
    for term in ("cust_find", "Find.Me@example.com", " cust_find "):
        page = await client.get("/admin", params={"reminder": term}, headers=headers)
        listed = page.text.split('id="matches"')[1].split("</table>")[0]
        assert "r:find-1" in listed and "r:find-2" in listed, term
    exact = await client.get("/admin", params={"reminder": "r:find-1"}, headers=headers)
    assert 'id="lookup"' in exact.text
    for term in ("nobody@example.com", "x\x00y", "z" * 5000):
        missing = await client.get("/admin", params={"reminder": term}, headers=headers)
        assert missing.status_code == 200 and "No reminder, customer id" in missing.text


async def test_the_page_script_is_served_by_the_app_and_the_live_region_needs_a_session(
    client,
):
    """live.js comes from /admin/static (the CSP allows only 'self'); /admin/live without a
    session redirects to the login, which the script reads as "signed out"."""
    script = await client.get("/admin/static/live.js")
    assert script.status_code == 200 and "data-refresh" in script.text
    assert script.headers["content-type"].startswith("text/javascript")
    anonymous = await client.get("/admin/live", follow_redirects=False)
    assert anonymous.status_code == 303 and anonymous.headers["location"] == "/admin/login"
    page = await client.get("/admin", headers=await _login(client))
    assert 'data-refresh="/admin/live?n=25"' in page.text
    assert '<script src="/admin/static/live.js" defer></script>' in page.text


async def test_the_lookup_and_the_live_region_tell_delivered_from_undelivered(
    client, clock, publisher, provider
):
    """A reminder whose only send was dead-lettered reads done but undelivered, per channel;
    the live region counts the last 24 hours' settled reminders by delivery summary."""
    await exhaust(client, publisher, clock, provider, "r:lost")
    headers = await _login(client)
    page = await client.get("/admin", params={"reminder": "r:lost"}, headers=headers)
    lookup = page.text.split('id="lookup"')[1].split("</p>")[0]
    assert '<span class="reminder-state">done</span>' in lookup
    assert '<span class="reminder-delivery">undelivered</span>' in lookup
    assert "(email undelivered)" in lookup
    listed = await client.get("/admin", params={"reminder": "cust_r_lost"}, headers=headers)
    assert "<td>undelivered</td>" in listed.text.split('id="matches"')[1]
    live = await client.get("/admin/live", headers=headers)
    settled = live.text.split('id="settled"')[1].split("</p>")[0]
    assert "undelivered 1" in settled and "delivered 0" in settled


def _chart_totals(html: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for outcome, count in re.findall(r'data-outcome="(\w+)" data-count="(\d+)"', html):
        totals[outcome] = totals.get(outcome, 0) + int(count)
    return totals


async def _redrive_from_the_page(client, headers, dead_letter_id: int):
    page = await client.get("/admin", headers=headers)
    form = {"target": "dead_letter", "id": str(dead_letter_id), "csrf": _csrf(page.text)}
    preview = await client.post("/admin/redrive/preview", data=form, headers=headers)
    assert preview.status_code == 200, preview.text
    return await client.post("/admin/redrive", data=form, headers=headers)


async def test_the_outcome_history_keeps_the_failures_a_redrive_fixed(
    client, clock, publisher, provider
):
    """Three failed attempts, then a redrive that delivers: the chart and the windows still
    show the three failures in the hours they happened, next to the one send (they count
    attempts, which are never rewritten, not each send record's last change)."""
    await exhaust(client, publisher, clock, provider, "r:spike")
    headers = await _login(client)
    [letter] = (await client.get("/v1/dead-letters", headers=ADMIN)).json()["items"]
    assert (await _redrive_from_the_page(client, headers, letter["id"])).status_code == 200
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"

    live = await client.get("/admin/live", headers=headers)
    assert _chart_totals(live.text) == {"failed": 3, "sent": 1}
    hours = re.findall(r'data-outcome="failed" data-count="1"\s+data-hour="([^"]+)"', live.text)
    assert len(set(hours)) == 3  # each failure in the hour it was tried (2 h apart)
    table = live.text.split('id="outcomes"')[1].split("</table>")[0]
    rows = {
        row[0]: [int(n) for n in row[1:]]
        for row in (re.findall(r">(\w+)</td>", line) for line in table.split("<tr>")[2:])
    }
    assert rows == {"failed": [1, 3, 3], "sent": [1, 1, 1]}  # last hour, day, week


async def test_after_a_redrive_the_result_shows_the_rows_as_they_are_now(
    client, clock, publisher, provider
):
    """'Redrive done' lists the send as it is after the redrive (pending again, was dead),
    not the state the redrive started from."""
    await exhaust(client, publisher, clock, provider, "r:now")
    headers = await _login(client)
    [letter] = (await client.get("/v1/dead-letters", headers=ADMIN)).json()["items"]
    done = await _redrive_from_the_page(client, headers, letter["id"])
    assert done.status_code == 200 and "Redrive done" in done.text
    [state] = re.findall(r'<td class="send-state">(.*?)</td>', done.text)
    assert state == 'pending <span class="muted">(was dead)</span>'


async def test_bad_parameters_and_refusals_are_html_pages_not_json(client):
    """A bad cursor, a page size out of range, an unknown form id or a form without its
    CSRF token answers the same status as before, as a page with the reason and a way back."""
    headers = await _login(client)
    cases = [
        ("get", "/admin", {"letters": "not-a-cursor"}, 422, "cursor"),
        ("get", "/admin", {"n": "x"}, 422, "n"),
        ("get", "/admin/live", {"sends": "1 OR 1=1"}, 422, "cursor"),
        ("post", "/admin/redrive/preview", {"target": "send", "id": "7"}, 401, "CSRF"),
    ]
    for method, path, params, status, named in cases:
        if method == "get":
            response = await client.get(path, params=params, headers=headers)
        else:
            response = await client.post(path, data=params, headers=headers)
        assert response.status_code == status, (path, params, response.text)
        assert response.headers["content-type"].startswith("text/html"), response.text
        assert "<html" in response.text and named in response.text.split('id="error"')[1]
        assert response.headers["x-frame-options"] == "DENY"
    json_api = await client.get("/v1/dead-letters", params={"cursor": "x"}, headers=ADMIN)
    assert json_api.headers["content-type"] == "application/json"


def _double_send_rows(html: str) -> dict[str, tuple[str, str, str]]:
    """Each double-send check on the page: (row class, count, examples cell)."""
    rows = re.findall(
        r'<tr data-check="(\w+)" class="(\w+)">.*?data-count="(\d+)".*?</td>\s*<td>(.*?)</td>',
        html,
        re.S,
    )
    return {name: (cls, count, examples) for name, cls, count, examples in rows}


async def test_the_page_shows_no_double_send_on_a_clean_ledger(client, container, clock):
    """Before the metrics task's first reading the section says so; after it every
    double-send check is 0, green, with no examples."""
    clock.set(NOW)
    headers = await _login(client)
    before = (await client.get("/admin", headers=headers)).text
    assert 'id="double-sends"' in before and "not checked yet" in before
    await container.ledger_metrics.refresh()  # the background task's reading (no lifespan)
    rows = _double_send_rows((await client.get("/admin/live", headers=headers)).text)
    assert set(rows) == {"provider_called_twice", "reclaimed_without_outcome",
                         "accepted_by_two_providers"}  # fmt: skip
    assert all(row == ("ok", "0", "none") for row in rows.values()), rows


async def test_the_page_shows_a_planted_double_send_and_a_reclaim_without_outcome(
    client, container, clock, message
):
    """Before: the doubles were only in /v1/audit, ``reminders audit`` and the metrics. Now
    the page shows each check's count and ids, red: a provider accepting two attempts of one
    send, and a redelivery taking over a send whose first worker vanished without an
    outcome (it may have called the provider)."""
    await plant_double(container)
    await container.receiver.ledger.claim_or_read(
        KEY, now=clock.now, lease_until=clock.now + LEASE, claimant=Claimant("gone:1")
    )
    clock.advance(seconds=LEASE.total_seconds() + 1)
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    await container.ledger_metrics.refresh()

    headers = await _login(client)
    rows = _double_send_rows((await client.get("/admin", headers=headers)).text)
    assert rows["provider_called_twice"][:2] == ("error", "1")
    assert "twice:email:smtp" in rows["provider_called_twice"][2]
    assert rows["reclaimed_without_outcome"][:2] == ("error", "1")
    assert "r1:email:scripted:2" in rows["reclaimed_without_outcome"][2]
    assert rows["accepted_by_two_providers"] == ("ok", "0", "none")


@pytest.mark.parametrize("path", ["/admin", "/admin/live"])
async def test_the_page_reads_the_audit_from_the_metrics_snapshot_only(
    client, container, clock, path
):
    """A double planted after the last reading shows at the next reading, not before: the
    page never runs the audit itself (too heavy per refresh on a large ledger)."""
    clock.set(NOW)
    headers = await _login(client)
    await container.ledger_metrics.refresh()
    await plant_double(container)
    stale = _double_send_rows((await client.get(path, headers=headers)).text)
    assert stale["provider_called_twice"][:2] == ("ok", "0")
    await container.ledger_metrics.refresh()
    fresh = _double_send_rows((await client.get(path, headers=headers)).text)
    assert fresh["provider_called_twice"][:2] == ("error", "1")
