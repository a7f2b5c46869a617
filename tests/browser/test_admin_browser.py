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

from app.adapters.queues.memory import MemoryPublisher
from app.db.engine import create_engine
from app.db.tables import dead_letters, send_records
from app.domain.errors import TransientProviderError
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, API_TOKEN, CRON_TOKEN, empty_all_tables, make_settings
from tests.support.live_server import live_server
from tests.support.providers import ScriptedProvider
from tests.support.push import signed

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

                [message] = publisher.drain()
                assert message.idempotency_key == f"{REMINDER}:email:v1:r1"
                assert _push(http, message).json()["outcome"] == "sent"

                page.click("[data-test=back]")
                page.fill("input[name=reminder]", REMINDER)
                page.click("text=Look up")
                expect(page.locator("#lookup .state")).to_have_text("sent")
                expect(page.locator("#dead-letters")).to_contain_text("none")
                page.screenshot(path=str(ARTIFACTS / "admin-redrive.png"), full_page=True)
            finally:
                browser.close()

    record, letter = asyncio.run(_ledger(database_url))
    assert record["state"] == "sent"
    assert record["redrive_count"] == 1
    assert record["attempt_count"] == 2  # the failed attempt is kept; the redrive added one
    assert letter["redriven_at"] is not None
    assert len(provider.calls) == 2
