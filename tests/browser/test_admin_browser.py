"""The admin page in a real headless Chromium: an operator redrives a dead letter and the
send becomes ``sent``.

Needs Debian's ``chromium`` at /usr/bin/chromium (``.ci/run`` installs it). Outside CI a
missing browser skips this test with the reason; under CI (``REMINDERS_CI=1``) it fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.adapters.queues.memory.publisher import MemoryPublisher
from app.db.engine import create_engine
from app.db.tables import dead_letters, send_records
from app.domain.errors import TransientProviderError
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, API_TOKEN, CRON_TOKEN, empty_all_tables, make_settings
from tests.support.live_server import live_server
from tests.support.providers import ScriptedProvider
from tests.support.push import envelope, signed

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REMINDER = "renewal:cust_browser:2026"


def _require_browser() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("REMINDERS_CI"):
        pytest.fail("REMINDERS_CI is set but /usr/bin/chromium is missing: .ci/run installs it")
    pytest.skip("Debian chromium is not installed (/usr/bin/chromium); .ci/run installs it")


def _seed_dead_letter(http: httpx.Client, publisher: MemoryPublisher) -> None:
    """Register, sweep and deliver once: the only attempt fails, so the send is dead."""
    api = {"Authorization": f"Bearer {API_TOKEN}"}
    customer = {"email": "browser@example.com"}
    assert http.put("/v1/customers/cust_browser", json=customer, headers=api).is_success
    reminder = {
        "customer_id": "cust_browser",
        "kind": "renewal",
        "due_at": "2026-01-01T00:00:00+00:00",
        "expires_at": "2099-01-01T00:00:00+00:00",
        "channels": ["email"],
        "data": {"plan": "Pro", "renews_on": "2026-12-01"},
    }
    assert http.put(f"/v1/reminders/{REMINDER}", json=reminder, headers=api).is_success
    assert http.post("/cron/sweep", headers={"Authorization": f"Bearer {CRON_TOKEN}"}).is_success
    [message] = publisher.drain()
    assert _push(http, message).json()["outcome"] == "dead_lettered"


def _push(http: httpx.Client, message) -> httpx.Response:
    raw, headers = signed({"message_id": message.message_id, "payload": message.payload})
    return http.post(f"/push/{message.queue}", content=raw, headers=headers)


async def _ledger(database_url: str) -> tuple[dict, dict]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            record = (await conn.execute(select(send_records))).one()._mapping
            letter = (await conn.execute(select(dead_letters))).one()._mapping
            return dict(record), dict(letter)
    finally:
        await engine.dispose()


@pytest.mark.slow
def test_operator_redrives_a_dead_letter_from_the_admin_page(database_url, tmp_path):
    """Login, see the dead letter, preview the dry run, confirm; the send becomes sent."""
    _require_browser()
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(empty_all_tables(database_url))
    settings = make_settings(database_url, tmp_path, max_attempts=1, queue="memory")
    provider = ScriptedProvider(
        script=[TransientProviderError("451 try later", detail_class="smtp_4xx")]
    )
    # The lifespan opens the container in the server's own loop (the PostgreSQL ledger's
    # pool belongs to it); the scripted provider goes in before the first request.
    app = create_app(settings)
    ARTIFACTS.mkdir(exist_ok=True)
    with (
        live_server(app) as base_url,
        httpx.Client(base_url=base_url, timeout=10) as http,
    ):
        container = app.state.container
        container.receiver = dataclasses.replace(
            container.receiver, providers={"email": provider, "webhook": provider}
        )
        publisher = container.publisher
        assert isinstance(publisher, MemoryPublisher)
        _seed_dead_letter(http, publisher)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(15_000)
                page.goto(f"{base_url}/admin")
                expect(page).to_have_url(f"{base_url}/admin/login")
                page.fill("input[name=token]", ADMIN_TOKEN)
                page.click("button[type=submit]")
                expect(page.locator("#groups")).to_contain_text("smtp_4xx")
                row = page.locator("#dead-letters tr[data-dead-letter]")
                expect(row).to_contain_text(REMINDER)
                row.locator("button").click()

                expect(page.locator("#summary")).to_contain_text("1 message(s) would be published")
                expect(page.locator("#report")).to_contain_text(f"{REMINDER}:email:v1:r1")
                assert publisher.messages == [], "the dry run published something"
                page.click("[data-test=confirm-redrive]")
                expect(page.locator("#summary")).to_contain_text("Published 1")
                # The row as it is after the redrive, not the state it started from.
                expect(page.locator("#report .send-state")).to_have_text("pending (was dead)")

                [message] = publisher.drain()
                assert message.idempotency_key == f"{REMINDER}:email:v1:r1"
                assert _push(http, message).json()["outcome"] == "sent"

                page.click("[data-test=back]")
                page.fill("input[name=reminder]", REMINDER)
                page.click("text=Look up")
                expect(page.locator("#lookup .state")).to_have_text("sent")
                expect(page.locator("#lookup .reminder-delivery")).to_have_text("delivered")
                expect(page.locator("#dead-letters")).to_contain_text("none")
                # The failure the redrive fixed is still in the history, next to the send.
                expect(page.locator("#chart-legend")).to_contain_text("failed 1")
                expect(page.locator("#chart-legend")).to_contain_text("sent 1")
                page.screenshot(path=str(ARTIFACTS / "admin-redrive.png"), full_page=True)
                page.goto(f"{base_url}/admin?letters=not-a-cursor")  # a hand-edited link
                expect(page.locator("h1")).to_have_text("Bad request")
                expect(page.locator("#error")).to_contain_text("cursor")
                page.click("[data-test=back]")
                expect(page).to_have_url(f"{base_url}/admin")
            finally:
                browser.close()

    record, letter = asyncio.run(_ledger(database_url))
    assert record["state"] == "sent"
    assert record["redrive_count"] == 1
    assert record["attempt_count"] == 2  # the failed attempt is kept; the redrive added one
    assert letter["redriven_at"] is not None
    assert len(provider.calls) == 2


def _register(http: httpx.Client, reminder_id: str) -> None:
    api = {"Authorization": f"Bearer {API_TOKEN}"}
    customer = {"email": "live@example.com"}
    assert http.put("/v1/customers/cust_live", json=customer, headers=api).is_success
    reminder = {
        "customer_id": "cust_live",
        "kind": "renewal",
        "due_at": "2026-01-01T00:00:00+00:00",
        "expires_at": "2099-01-01T00:00:00+00:00",
        "channels": ["email"],
        "data": {"plan": "Pro", "renews_on": "2026-12-01"},
    }
    assert http.put(f"/v1/reminders/{reminder_id}", json=reminder, headers=api).is_success


def _sweep(http: httpx.Client, publisher: MemoryPublisher) -> list:
    assert http.post("/cron/sweep", headers={"Authorization": f"Bearer {CRON_TOKEN}"}).is_success
    return publisher.drain()


def _seed_live_page(http: httpx.Client, publisher: MemoryPublisher) -> object:
    """One send delivered, three quarantined letters for reminders that do not exist, and
    one message swept but not yet delivered (returned, for after the page has loaded)."""
    _register(http, "r:live-early")
    [early] = _sweep(http, publisher)
    assert _push(http, early).json()["outcome"] == "sent"
    for n in range(3):
        raw, headers = signed(envelope(f"r:missing-{n}", message_id=f"m-missing-{n}"))
        assert http.post(f"/push/{early.queue}", content=raw, headers=headers).is_success
    _register(http, "r:live-late")
    [late] = _sweep(http, publisher)
    return late


@pytest.mark.slow
def test_the_live_page_refreshes_charts_pages_and_discards(database_url, tmp_path):
    """A send delivered after the page loaded appears without a reload; the chart draws the
    sends; dead letters page two at a time; a quarantined letter is discarded."""
    _require_browser()
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(empty_all_tables(database_url))
    settings = make_settings(database_url, tmp_path, queue="memory")
    app = create_app(settings)
    with (
        live_server(app) as base_url,
        httpx.Client(base_url=base_url, timeout=10) as http,
    ):
        publisher = app.state.container.publisher
        assert isinstance(publisher, MemoryPublisher)
        late = _seed_live_page(http, publisher)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(15_000)
                page.goto(f"{base_url}/admin/login")
                page.fill("input[name=token]", ADMIN_TOKEN)
                page.click("button[type=submit]")
                page.goto(f"{base_url}/admin?n=2")
                expect(page.locator("#outcome-chart rect[data-outcome=sent]")).to_have_count(1)
                expect(page.locator("#chart-legend")).to_contain_text("sent 1")
                page.evaluate("window.loadedOnce = true")

                assert _push(http, late).json()["outcome"] == "sent"
                # The page refreshes every 5 s: wait up to three rounds.
                refreshed = {"timeout": 15_000}
                expect(page.locator("#recent-sends")).to_contain_text("r:live-late", **refreshed)
                expect(page.locator("#chart-legend")).to_contain_text("sent 2", **refreshed)
                assert page.evaluate("window.loadedOnce") is True, "the page was reloaded"

                letters = page.locator("#dead-letters tr[data-dead-letter]")
                expect(letters).to_have_count(2)
                expect(letters.first).to_contain_text("r:missing-0")
                page.click("[data-test=letters-next]")
                expect(letters).to_have_count(1)
                expect(letters.first).to_contain_text("r:missing-2")
                page.click("[data-test=letters-first]")
                expect(letters.first).to_contain_text("r:missing-0")

                letters.first.locator("button", has_text="Discard").click()
                expect(page.locator("#summary")).to_contain_text("discarded")
                page.click("[data-test=back]")
                expect(page.locator("#dead-letters")).not_to_contain_text("r:missing-0")
                expect(page.locator("#groups")).to_contain_text("2")
                page.screenshot(path=str(ARTIFACTS / "admin-live.png"), full_page=True)
            finally:
                browser.close()
