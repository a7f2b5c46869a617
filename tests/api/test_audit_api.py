"""The audit on the operator surfaces: ``GET /v1/audit`` (admin token), a gauge per
invariant on ``/metrics``, and ``reminders audit`` (exit 1 naming the violation)."""

from __future__ import annotations

import json

import anyio
import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.cli.test_dead_letters_cli import cli_env
from tests.support.dead_letters import ADMIN
from tests.support.flow import API, scrape
from tests.support.ledger_states import NOW, add_customer, add_reminder, add_send

pytestmark = pytest.mark.anyio
__all__ = ["cli_env"]  # the CLI's environment, pointed at the test database


async def make_stuck(container) -> None:
    """A reminder left enqueued with both channels final (the two-channel race)."""
    await add_customer(container.engine)
    await add_reminder(container.engine, "stuck")
    await add_send(container.engine, "stuck", "email", "sent")
    await add_send(container.engine, "stuck", "webhook", "sent")


def by_name(body: dict) -> dict[str, dict]:
    return {invariant["name"]: invariant for invariant in body["invariants"]}


async def test_the_audit_route_needs_the_admin_token_and_names_violations(client, container, clock):
    """401 with the application's token; with the admin token: ok on a clean ledger, then
    the stuck reminder named under ``final_not_settled``."""
    clock.set(NOW)
    assert (await client.get("/v1/audit", headers=API)).status_code == 401
    clean = await client.get("/v1/audit", headers=ADMIN)
    assert clean.status_code == 200 and clean.json()["ok"] is True
    await make_stuck(container)
    body = (await client.get("/v1/audit", headers=ADMIN)).json()
    assert body["ok"] is False
    failed = {name for name, item in by_name(body).items() if not item["holds"]}
    assert failed == {"final_not_settled"}
    assert by_name(body)["final_not_settled"]["examples"] == ["stuck"]


async def test_metrics_expose_one_gauge_per_invariant(client, container, clock):
    """``reminders_audit_violations`` per invariant: 1 for the stuck reminder, 0 elsewhere."""
    clock.set(NOW)
    await make_stuck(container)
    text = await scrape(client)
    assert 'reminders_audit_violations{invariant="final_not_settled"} 1.0' in text
    assert 'reminders_audit_violations{invariant="sent_twice"} 0.0' in text


async def test_the_cli_exits_1_naming_the_violation_and_repair_settles_it(container, cli_env):
    """``reminders audit`` exits 1 and names the invariant and the id; ``--repair`` settles
    the reminder and the audit passes (exit 0)."""
    await make_stuck(container)
    runner = CliRunner()

    async def invoke(*args: str):
        return await anyio.to_thread.run_sync(lambda: runner.invoke(cli, ["audit", *args]))

    failed = await invoke()
    assert failed.exit_code == 1, failed.output
    assert "violated: final_not_settled" in failed.output and "stuck" in failed.output
    repaired = await invoke("--repair")
    assert repaired.exit_code == 0, repaired.output
    start = repaired.stdout.index("{")
    assert json.loads(repaired.stdout[start:])["ok"] is True
