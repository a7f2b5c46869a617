"""The one shared outbound HTTP pool: built by the lifespan, shared, closed at shutdown."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from app.adapters.channels.http import retry_after_seconds
from app.main import create_app
from tests.conftest import REAL_MAIL, make_settings

pytestmark = pytest.mark.anyio


async def test_lifespan_owns_one_pool_and_closes_it(clean_database_url, tmp_path):
    """Email API and webhook providers share the lifespan's pool, closed when the app stops."""
    settings = make_settings(
        clean_database_url,
        tmp_path,
        email_provider="email_api",
        **REAL_MAIL,
        email_api_key=SecretStr("re_key"),
        unsubscribe_secret=SecretStr("u-secret-3b8f2e6a9c1d4705e8f2a6b9"),
        webhook_provider="webhook",
        webhook_signing_secret=SecretStr("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        container = app.state.container
        providers = container.receiver.providers
        assert providers["email"].http is providers["webhook"].http is container.http
        session = container.http.session()
        assert container.http.session() is session and not session.closed
    assert session.closed


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("30", 30.0),
        (" 5 ", 5.0),
        ("Mon, 10 Aug 2026 09:01:00 GMT", 60.0),
        ("Mon, 10 Aug 2026 08:00:00 GMT", 0.0),
        ("soon", None),
        (None, None),
        ("-3", None),
    ],
)
def test_retry_after_accepts_seconds_and_http_dates(header, seconds):
    """Retry-After is delta-seconds or an HTTP date (past dates mean now); junk is ignored."""
    now = datetime(2026, 8, 10, 9, 0, tzinfo=UTC)
    assert retry_after_seconds(header, now=now) == seconds
