"""``POST /push/{queue}`` is served ahead of the general stack, and answers as it would.

The direct entry (``app/api/push_entry.py``) skips the route table and the framework's
middleware; these tests hold it to the general stack's answers, request by request, with
the same handler behind both (``direct_push = False`` is how an OpenTelemetry-instrumented
app serves deliveries).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import httpx
import pytest

from app.main import create_app
from tests.support.flow import put_customer, put_reminder
from tests.support.push import envelope, signed

pytestmark = pytest.mark.anyio


class SeenPaths:
    """A pure ASGI middleware that writes down the paths it sees."""

    def __init__(self, app: Any, seen: list[str]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append(scope["path"])
        await self.app(scope, receive, send)


def client_for(container, *, direct: bool, seen: list[str] | None = None) -> httpx.AsyncClient:
    app = create_app(container=container)
    app.state.container = container
    app.direct_push = direct
    if seen is not None:
        app.add_middleware(SeenPaths, seen=seen)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


def comparable(response: httpx.Response) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers, without the request id (fresh per request)."""
    headers = {k: v for k, v in response.headers.items() if k != "x-request-id"}
    return response.status_code, response.content, headers


async def test_a_delivery_skips_the_general_stack_and_other_requests_do_not(container):
    seen: list[str] = []
    async with client_for(container, direct=True, seen=seen) as client:
        raw, headers = signed(envelope("r-none"))
        answered = await client.post("/push/reminders", content=raw, headers=headers)
        assert answered.status_code == 200  # an unknown reminder: kept aside, acknowledged
        assert answered.headers["x-request-id"]
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/push/reminders")).status_code == 405
    assert seen == ["/healthz", "/push/reminders"]


async def test_without_the_direct_entry_a_delivery_takes_the_middleware(container):
    seen: list[str] = []
    async with client_for(container, direct=False, seen=seen) as client:
        raw, headers = signed(envelope("r-none"))
        assert (await client.post("/push/reminders", content=raw, headers=headers)).is_success
    assert seen == ["/push/reminders"]


def refusals() -> list[tuple[str, bytes, dict[str, str]]]:
    """(path, body, headers) of requests that change nothing, each refused or set aside."""
    raw, headers = signed(envelope("r-none", message_id="m-unknown"))
    malformed, malformed_headers = signed(b'{"message_id": "m-bad", "payload": {"v": 9}}')
    too_large = {**headers, "content-length": str(10 * 1024 * 1024)}
    return [
        ("/push/reminders", raw, {**headers, "x-infrai-signature": "sha256=" + "0" * 64}),
        ("/push/reminders", raw, {"content-type": "application/json"}),
        ("/push/no-such-queue", raw, headers),
        ("/push/reminders/extra", raw, headers),
        ("/push/", raw, headers),
        ("/push/reminders", malformed, malformed_headers),
        ("/push/reminders", raw, too_large),
        ("/push/reminders?token=x", raw, headers),
    ]


@pytest.mark.parametrize("index", range(len(refusals())))
async def test_refusals_answer_exactly_as_through_the_general_stack(container, index):
    path, body, headers = refusals()[index]
    async with (
        client_for(container, direct=True) as direct,
        client_for(container, direct=False) as general,
    ):
        first = await direct.post(path, content=body, headers=headers)
        second = await general.post(path, content=body, headers=headers)
    assert comparable(first) == comparable(second)
    assert first.status_code in {200, 401, 404, 413}, first.text


async def test_a_send_and_its_duplicate_answer_as_through_the_general_stack(
    container, clock, provider
):
    async with (
        client_for(container, direct=True) as direct,
        client_for(container, direct=False) as general,
    ):
        await put_customer(direct, "cust_entry")
        for reminder_id in ("r:one", "r:two"):
            await put_reminder(direct, reminder_id, customer_id="cust_entry", due_at=clock.now)
        answers: dict[str, list[httpx.Response]] = {}
        for reminder_id, order in (
            ("r:one", (direct, general, direct)),
            ("r:two", (general, direct, general)),
        ):
            raw, headers = signed(envelope(reminder_id, message_id=f"m-{reminder_id}"))
            answers[reminder_id] = [
                await client.post("/push/reminders", content=raw, headers=headers)
                for client in order
            ]
    for responses in answers.values():
        assert [r.json()["outcome"] for r in responses] == ["sent", "duplicate", "duplicate"]
    # Same answers, but for the reminder's id (of the same length) in the body.
    assert [comparable(r) for r in answers["r:one"]] == [
        (status, body.replace(b"r:two", b"r:one"), headers)
        for status, body, headers in map(comparable, answers["r:two"])
    ]
    assert len(provider.calls) == 2


class BrokenLedger:
    """A ledger whose claim fails with a bug: neither ours nor the database's error."""

    def __init__(self, ledger: Any) -> None:
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    async def claim_or_read(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the claim")


async def test_an_unexpected_error_is_a_500_and_an_access_line_either_way(
    container, clock, log_lines
):
    async with client_for(container, direct=True) as setup:
        await put_customer(setup, "cust_bug")
        await put_reminder(setup, "r:bug", customer_id="cust_bug", due_at=clock.now)
    container.receiver = dataclasses.replace(
        container.receiver, ledger=BrokenLedger(container.receiver.ledger)
    )
    raw, headers = signed(envelope("r:bug", message_id="m-bug"))
    responses = []
    for direct in (True, False):
        async with client_for(container, direct=direct) as client:
            responses.append(await client.post("/push/reminders", content=raw, headers=headers))
    assert [r.status_code for r in responses] == [500, 500]
    assert comparable(responses[0]) == comparable(responses[1])
    lines = [
        line
        for line in log_lines()
        if line.get("event") == "request" and line.get("route") == "/push/{queue}"
    ]
    assert [line["status"] for line in lines] == [500, 500]
