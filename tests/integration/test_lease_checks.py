"""A lease is checked at the moment it matters (issue 19, point 2).

A claim that waited past its lease (a row lock, a stalled database, a paused process)
commits a lease already over, and another delivery may reclaim the row at once: no
provider call may follow it. A provider call cut off after its request left is
``unknown_outcome``, and such attempts are capped and spaced (a hanging endpoint got 139
POSTs for 20 reminders).
"""

from __future__ import annotations

import asyncio

import pytest

from app.domain.errors import TransientProviderError
from app.domain.ledger import MAX_UNKNOWN_OUTCOMES, UNKNOWN_OUTCOME_SPACING
from tests.conftest import make_settings
from tests.integration.test_leases import LEASE, message, the_row
from tests.integration.test_ledger_connections import observer
from tests.support.flow import push_message

pytestmark = pytest.mark.anyio
__all__ = ["message", "observer"]


async def test_a_claim_that_waited_past_its_lease_calls_no_provider(
    client, container, clock, provider, message, observer
):
    """A row lock held past the lease while the redelivery's claim waits. Before: the claim
    committed its expired lease and the webhook went out (two POSTs 2.7 ms apart in the
    drill, another worker having reclaimed at once)."""
    provider.script = [TransientProviderError("503")]
    assert (await push_message(client, message)).json()["outcome"] == "retry"
    clock.advance(seconds=3600)  # the retry is due
    await observer.execute("BEGIN")
    await observer.execute("SELECT 1 FROM send_records WHERE reminder_id = 'r1' FOR UPDATE")
    redelivery = asyncio.create_task(push_message(client, message))
    while not await observer.fetchval(  # noqa: ASYNC110 (polling the server's lock table)
        "SELECT count(*) FROM pg_locks WHERE NOT granted"
    ):
        await asyncio.sleep(0.01)
    clock.advance(seconds=LEASE.total_seconds() + 1)  # the lock is held past the lease
    await observer.execute("COMMIT")
    answer = (await redelivery).json()
    assert (answer["outcome"], answer["detail"]) == ("busy", "lease_expired")
    assert len(provider.calls) == 1  # only the first, failed, attempt
    row = await the_row(container)
    assert (row["state"], row["attempt_count"] - row["attempt_budget_start"]) == ("pending", 1)


@pytest.fixture
def settings(clean_database_url, tmp_path):
    """A short provider timeout, so a provider that ignores it is cut off quickly."""
    return make_settings(
        clean_database_url, tmp_path, lease_seconds=3, provider_timeout_seconds=0.2
    )


async def test_a_cut_off_call_is_unknown_outcome_capped_and_spaced(
    client, container, clock, provider, message
):
    """The provider holds the request past every timeout. Before: recorded ``timeout`` and
    retried after the usual backoff up to REMINDERS_MAX_ATTEMPTS; now ``unknown_outcome``,
    retried no sooner than the spacing, dead-lettered at the cap."""
    provider.gate = asyncio.Event()  # never opens: the endpoint hangs
    first = (await push_message(client, message)).json()
    assert (first["outcome"], first["detail"]) == ("retry", "unknown_outcome")
    assert first["retry_after"] >= UNKNOWN_OUTCOME_SPACING.total_seconds()
    clock.advance(seconds=UNKNOWN_OUTCOME_SPACING.total_seconds() + 1)
    second = (await push_message(client, message)).json()
    assert second["outcome"] == "dead_lettered"
    assert len(provider.calls) == MAX_UNKNOWN_OUTCOMES == 2
    row = await the_row(container)
    assert (row["state"], row["last_error_class"]) == ("dead", "unknown_outcome")
