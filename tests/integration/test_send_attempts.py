"""The attempts' history and the audit that reads it (issue 19, point 3).

Every claim appends a row to ``send_attempts`` (who, when, lease), given its outcome once
at the end; the audit names sends whose provider, with no idempotency key of its own, was
called by two attempts that may each have been accepted, and reclaims of sends whose
earlier attempt never recorded an outcome. ``reminders audit`` exits 1 on them.
"""

from __future__ import annotations

import anyio
import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.db import attempts_repo
from app.domain.ledger import AttemptEnd, Claimant, LedgerKey, SendRecordView
from app.domain.states import SendState
from app.services.attempt import WORKER
from tests.api.test_audit_api import by_name
from tests.cli.test_dead_letters_cli import cli_env
from tests.integration.test_leases import LEASE, message
from tests.support.dead_letters import ADMIN
from tests.support.flow import push_message, scrape
from tests.support.ledger_states import NOW, add_customer, add_reminder, add_send

pytestmark = pytest.mark.anyio
__all__ = ["cli_env", "message"]
KEY = LedgerKey("r1", "email", "scripted")


async def attempts(container, record_id: int) -> list[dict]:
    async with container.engine.connect() as conn:
        return await attempts_repo.list_attempts(conn, record_id)


async def test_each_delivery_appends_its_attempt_with_its_outcome(client, container, message):
    """A send: one attempt, claimed by this process under its lease, provider called, sent."""
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    [row] = await attempts(container, 1)
    assert (row["attempt"], row["claimed_by"], row["outcome"]) == (1, WORKER, "sent")
    assert row["provider_called"] is True and row["provider_deduplicates"] is False
    assert row["lease_until"] == row["claimed_at"] + LEASE


async def plant_double(container, *, deduplicates: bool = False) -> None:
    """An SMTP send whose provider accepted two attempts: the second after a reclaim."""
    await add_customer(container.engine)
    await add_reminder(container.engine, "twice", channels=("email",))
    record_id = await add_send(container.engine, "twice", "email", "sent", provider="smtp")
    key = LedgerKey("twice", "email", "smtp")
    async with container.engine.begin() as conn:
        for attempt in (1, 2):
            record = SendRecordView(record_id, SendState.SENDING, attempt, 0, NOW + LEASE, None)
            await attempts_repo.record_attempt(
                conn, record, key, claimed_by=f"host:{attempt}", claimed_at=NOW,
                provider_deduplicates=deduplicates,
            )  # fmt: skip
            await attempts_repo.record_outcome(
                conn, record, AttemptEnd("sent", provider_called=True), finished_at=NOW
            )


async def test_the_audit_fails_on_a_planted_double_send(client, container, clock):
    """Before: ``"ok": true`` whatever the providers received; now the double is named."""
    clock.set(NOW)
    await plant_double(container)
    body = (await client.get("/v1/audit", headers=ADMIN)).json()
    assert body["ok"] is False
    assert by_name(body)["provider_called_twice"]["examples"] == ["twice:email:smtp"]
    text = await scrape(client)
    assert 'reminders_audit_violations{invariant="provider_called_twice"} 1.0' in text


async def test_reminders_audit_exits_1_on_a_double_send(container, cli_env):
    """The CLI names the invariant and the send and exits non-zero."""
    await plant_double(container)
    runner = CliRunner()
    result = await anyio.to_thread.run_sync(lambda: runner.invoke(cli, ["audit"]))
    assert result.exit_code == 1, result.output
    assert "provider_called_twice" in result.output and "twice:email:smtp" in result.output


async def test_a_provider_that_deduplicates_is_not_a_double(client, container, clock):
    """Two accepted calls to a provider keyed by our idempotency key deliver once."""
    clock.set(NOW)
    await plant_double(container, deduplicates=True)
    body = (await client.get("/v1/audit", headers=ADMIN)).json()
    assert by_name(body)["provider_called_twice"]["holds"] is True


async def test_a_reclaim_of_an_attempt_without_outcome_is_reported(
    client, container, clock, message
):
    """A worker claimed and vanished (no outcome); after its lease a redelivery took the
    send over and sent it: the audit names the reclaim (the first may have sent too)."""
    ledger = container.receiver.ledger
    claim = await ledger.claim_or_read(
        KEY, now=clock.now, lease_until=clock.now + LEASE, claimant=Claimant("gone:1")
    )
    clock.advance(seconds=LEASE.total_seconds() + 1)
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    first, second = await attempts(container, claim.record.id)
    assert (first["outcome"], second["outcome"]) == (None, "sent")
    body = (await client.get("/v1/audit", headers=ADMIN)).json()
    assert by_name(body)["reclaimed_without_outcome"]["examples"] == ["r1:email:scripted:2"]
