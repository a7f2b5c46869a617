"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) work with no internet access: each page
references only the service's own URLs, and the service serves every one of them (the
scripts and styles come from the installed fastapi-offline package, not from a CDN)."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from app.main import create_app
from tests.conftest import empty_all_tables, make_settings
from tests.support.live_server import live_server

# src="…", href="…", spec-url="…" attributes and Swagger UI's `url: '…'` setting.
REFERENCE = re.compile(r"""(?:src|href|spec-url)="([^"]*)"|\burl: '([^']*)'""")
# What each page needs to draw anything, by the suffix of its URL.
EXPECTED_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png", ".json": "json"}


@pytest.fixture(scope="module")
def base_url(database_url, tmp_path_factory):
    asyncio.run(empty_all_tables(database_url))
    app = create_app(make_settings(database_url, tmp_path_factory.mktemp("docs"), queue="memory"))
    with live_server(app) as url:
        yield url


@pytest.mark.parametrize(
    ("page", "needs"),
    [
        ("/docs", {"swagger-ui-bundle.js", "swagger-ui.css", "openapi.json"}),
        ("/redoc", {"redoc.standalone.js", "openapi.json"}),
    ],
)
def test_the_docs_pages_load_only_local_assets(base_url, page, needs):
    """No absolute URL anywhere in the page; each referenced asset answers 200 from this
    server with its content type, and the page's script is the real bundle."""
    with httpx.Client(base_url=base_url, timeout=10) as http:
        html = http.get(page).raise_for_status().text
        assert "http://" not in html and "https://" not in html and "//cdn" not in html
        references = [a or b for a, b in REFERENCE.findall(html)]
        assert {ref.rsplit("/", 1)[-1] for ref in references} >= needs, references
        for ref in references:
            assert ref.startswith("/") and not ref.startswith("//"), ref
            answer = http.get(ref)
            assert answer.status_code == 200, ref
            suffix = "." + ref.rsplit(".", 1)[-1]
            assert EXPECTED_TYPES[suffix] in answer.headers["content-type"], ref
            if suffix == ".js":
                assert len(answer.content) > 500_000, ref  # the bundle, not a stub
