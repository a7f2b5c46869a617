"""Guessing is throttled: failed bearer checks, admin logins and push signatures are counted
per client address and overall; over budget the answer is 429 with Retry-After, each failure
is logged at warning (never with the value tried) and counted in metrics."""

from __future__ import annotations

import logging

import httpx
import pytest
from prometheus_client import REGISTRY

from app.domain.throttle import AuthThrottle
from app.main import create_app
from tests.support.flow import API
from tests.support.push import signed

pytestmark = pytest.mark.anyio

GUESS = "Bearer guessed-value-0a1b2c3d4e5f6a7b8c9d0e1f"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock_seconds() -> Clock:
    return Clock()


@pytest.fixture
def throttled(container, clock_seconds):
    """The container with small budgets: 3 failures per client, 5 overall, per 60 s."""
    container.auth_throttle = AuthThrottle(
        per_client=3, overall=5, window_seconds=60, clock=clock_seconds
    )
    return container


def client_at(container, address: str) -> httpx.AsyncClient:
    """An HTTP client whose requests come from ``address``."""
    app = create_app(container=container)
    app.state.container = container
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


def _count(name: str, credential: str) -> float:
    return REGISTRY.get_sample_value(name, {"credential": credential}) or 0.0


async def test_a_client_over_its_budget_gets_429_even_with_the_right_token(
    throttled, clock_seconds
):
    """Three wrong tokens: 401 each; then 429 with Retry-After for that address, whatever it
    sends (a right guess is not told apart); another address is unaffected; the window ends."""
    guessing = {"Authorization": GUESS}
    async with client_at(throttled, "203.0.113.7") as attacker:
        for _ in range(3):
            assert (await attacker.get("/v1/reminders", headers=guessing)).status_code == 401
        refused = await attacker.get("/v1/reminders", headers=guessing)
        assert refused.status_code == 429, refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert (await attacker.get("/v1/reminders", headers=API)).status_code == 429
        async with client_at(throttled, "198.51.100.2") as other:
            assert (await other.get("/v1/reminders", headers=API)).status_code == 200
        clock_seconds.now += 61
        assert (await attacker.get("/v1/reminders", headers=API)).status_code == 200


async def test_the_global_budget_answers_429_to_failures_but_lets_valid_tokens_in(throttled):
    """Guesses spread over many addresses: past the global budget each failure is 429, while
    a valid token still passes (a flood cannot lock the operators out)."""
    for n in range(5):
        async with client_at(throttled, f"192.0.2.{n}") as guesser:
            response = await guesser.get("/v1/reminders", headers={"Authorization": GUESS})
            assert response.status_code == 401
    async with client_at(throttled, "192.0.2.99") as guesser:
        response = await guesser.get("/v1/reminders", headers={"Authorization": GUESS})
        assert response.status_code == 429 and "Retry-After" in response.headers
        assert (await guesser.get("/v1/reminders", headers=API)).status_code == 200


async def test_failed_admin_logins_are_throttled_logged_and_counted(throttled, caplog):
    """Admin logins share the rule; the warning names the credential and the address, never
    the guessed value; reminders_auth_failures_total and _throttled_total count them."""
    failures = _count("reminders_auth_failures_total", "admin_login")
    throttled_before = _count("reminders_auth_throttled_total", "admin_login")
    guessed = "my-guess-8f7e6d5c4b3a29180f7e6d5c4b3a"
    with caplog.at_level(logging.WARNING, logger="reminders.auth"):
        async with client_at(throttled, "203.0.113.9") as attacker:
            codes = [
                (await attacker.post("/admin/login", data={"token": guessed})).status_code
                for _ in range(5)
            ]
    assert codes == [401, 401, 401, 429, 429]
    lines = [record.getMessage() for record in caplog.records if record.name == "reminders.auth"]
    assert len(lines) == 3 and all("203.0.113.9" in line for line in lines)
    assert all(guessed not in line for line in caplog.text.splitlines())
    assert _count("reminders_auth_failures_total", "admin_login") == failures + 3
    assert _count("reminders_auth_throttled_total", "admin_login") == throttled_before + 2


async def test_failed_push_signatures_count_and_valid_pushes_are_not_slowed(throttled):
    """Push: only failed signatures spend the budget (429 past it); a correctly signed push
    from the same address is never pre-checked and still answers 200."""
    codes = []
    async with client_at(throttled, "203.0.113.20") as queue:
        for _ in range(4):
            raw, headers = signed(b'{"message_id": "m", "payload": {}}', secret="wrong-secret")
            codes.append(
                (await queue.post("/push/reminders", content=raw, headers=headers)).status_code
            )
        raw, headers = signed(
            {
                "message_id": "m1",
                "payload": {"v": 1, "reminder_id": "r9", "channel": "email", "schedule_version": 1},
            }
        )
        valid = await queue.post("/push/reminders", content=raw, headers=headers)
    assert codes == [401, 401, 401, 429]
    assert valid.status_code == 200, valid.text


def test_the_default_budgets_stop_a_guessing_rate_of_hundreds_per_second():
    """935 guesses in a second from one address: 20 get an answer, the rest 429."""
    throttle = AuthThrottle(per_client=20, overall=200, window_seconds=60, clock=Clock())
    answers = [
        "429" if throttle.blocked("a") is not None or throttle.failed("a") else "401"
        for _ in range(935)
    ]
    assert answers.count("401") == 20
