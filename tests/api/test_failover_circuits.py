"""Failover's circuits on /metrics and /admin: each provider of a channel with several,
from the first scrape, as this process's breakers stand."""

from pathlib import Path

import pytest
from pydantic import SecretStr

from app.settings import Settings
from tests.conftest import REAL_MAIL, make_settings
from tests.support.dead_letters import ADMIN_TOKEN
from tests.support.flow import scrape


@pytest.fixture
def settings(clean_database_url: str, tmp_path: Path) -> Settings:
    return make_settings(
        clean_database_url, tmp_path, **REAL_MAIL, email_providers=["email_api", "smtp"],
        email_api_key=SecretStr("re_failover_test_key_0123456789abcdef"),
        unsubscribe_secret=SecretStr("failover-unsubscribe-secret-0123456789abcd"),
        circuit_failures=2, circuit_cooldown_seconds=30,
    )  # fmt: skip


def _circuit(text: str, provider: str) -> str:
    prefix = f'reminders_provider_circuit_state{{channel="email",provider="{provider}"}} '
    [line] = [line for line in text.splitlines() if line.startswith(prefix)]
    return line.removeprefix(prefix)


async def test_each_providers_circuit_is_exported_and_follows_its_breaker(client, container, clock):
    """Closed (0) from startup, open (2) after its failures, half open (1) once cooled."""
    text = await scrape(client)
    assert (_circuit(text, "email_api"), _circuit(text, "smtp")) == ("0.0", "0.0")
    breaker = container.receiver.breakers["email_api"]
    for _ in range(2):
        breaker.record(clock(), failed=True)
    assert _circuit(await scrape(client), "email_api") == "2.0"
    clock.advance(seconds=30)
    assert _circuit(await scrape(client), "email_api") == "1.0"


async def test_the_admin_page_shows_each_providers_circuit(client, container, clock):
    """The overview lists the failover providers with their circuit."""
    for _ in range(2):
        container.receiver.breakers["smtp"].record(clock(), failed=True)
    login = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    cookie = {"Cookie": login.headers["set-cookie"].split(";", 1)[0]}
    page = (await client.get("/admin", headers=cookie)).text
    assert '<tr data-circuit="email_api"><td>email</td><td>email_api</td><td>closed</td>' in page
    assert '<tr data-circuit="smtp"><td>email</td><td>smtp</td><td>open</td>' in page
