"""``/docs`` and ``/redoc`` draw the API in a real headless Chromium that can reach nothing
but the service: every request to another host is refused, and none is attempted.

Needs Debian's ``chromium`` at /usr/bin/chromium (``.ci/run`` installs it). Outside CI a
missing browser skips this test with the reason; under CI (``REMINDERS_CI=1``) it fails.
"""

from __future__ import annotations

import asyncio

import pytest

from app.main import create_app
from tests.browser.test_admin_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, _require_browser
from tests.conftest import empty_all_tables, make_settings
from tests.support.live_server import live_server

# What each page shows once it has drawn the document: an operation of the customers tag.
DRAWN = {
    "/docs": "#operations-customers-put_customer",
    "/redoc": "[data-section-id='tag/customers/operation/put_customer']",
}


@pytest.mark.slow
def test_the_docs_pages_draw_the_api_offline(database_url, tmp_path):
    """Both pages render the operations with every outside request blocked; no page even
    tries to reach another host (fonts, scripts, validator badges)."""
    _require_browser()
    from playwright.sync_api import expect, sync_playwright

    asyncio.run(empty_all_tables(database_url))
    app = create_app(make_settings(database_url, tmp_path, queue="memory"))
    ARTIFACTS.mkdir(exist_ok=True)
    outside: list[str] = []
    with live_server(app) as base_url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)

            def only_local(route) -> None:
                if route.request.url.startswith(base_url):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", only_local)
            for path, drawn in DRAWN.items():
                page.goto(f"{base_url}{path}")
                expect(page.locator(drawn).first).to_be_visible()
                name = path.strip("/")
                page.screenshot(path=str(ARTIFACTS / f"api-{name}.png"))
        finally:
            browser.close()
    assert outside == []
