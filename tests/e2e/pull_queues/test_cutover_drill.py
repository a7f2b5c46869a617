"""The cut-over drill: a service on the embedded queue moves to RabbitMQ (and to SQS) while
messages are in flight in both queues, as in a rolling deploy.

The old ``reminders serve`` keeps dispatching the embedded queue while the new
configuration sweeps into the broker and ``reminders move-embedded`` moves the embedded
queue's waiting messages there, so some messages are delivered by both; then the old
process stops. Counted at the provider (the outbox's files): every reminder sent exactly
once, the ones due beyond the broker's delay horizon handed back to the sweep, none lost.
"""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.e2e.processes import (
    REMINDERS,
    Process,
    free_port,
    serve,
    service_env,
    wait_healthy,
    wait_until,
)
from tests.support.flow import put_customer, put_reminder, sweep
from tests.support.pull_queues import broker_publisher

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

DUE_NOW, DUE_SOON, DUE_LATER, AFTER_CUTOVER = 120, 40, 10, 50
# The "soon" reminders wait in the embedded queue at the cut-over and come due while both
# the old process and the new worker hold them (the broker's delay horizon here is 8 s).
SOON_SECONDS = 12


async def test_cutover_from_the_embedded_queue_sends_every_reminder_exactly_once(
    pull_queue, client, container, clock, settings, ledger, processes, tmp_path
):
    from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
    from app.adapters.queues.registry import close_publisher

    kind, queue, variables = pull_queue
    start = datetime.now(UTC)
    clock.set(start)  # the processes run on the real clock
    outbox = tmp_path / "outbox"
    await put_customer(client, "cust_1")
    await _register(client, "now", DUE_NOW, start)
    await _register(client, "soon", DUE_SOON, start + timedelta(seconds=SOON_SECONDS))
    await _register(client, "later", DUE_LATER, start + timedelta(hours=1))
    container.publisher = EmbeddedQueuePublisher(container.engine, clock=clock)
    embedded_total = DUE_NOW + DUE_SOON + DUE_LATER
    assert (await sweep(client))["messages"] == embedded_total

    # The old configuration: serve dispatches the embedded queue in process.
    common = {"REMINDERS_QUEUE_NAME": queue, "REMINDERS_WEBHOOK_PROVIDER": "outbox"}
    old_env = service_env(settings.database_url, outbox, REMINDERS_QUEUE="embedded", **common)
    port = free_port()
    old = serve(old_env, port, tmp_path / "old-serve.log").start()
    processes.append(old)
    await wait_healthy(f"http://127.0.0.1:{port}", old)
    await wait_until(lambda: _sent_at_least(ledger, 5), timeout=60, what="old serve sending",
                     processes=(old,))  # fmt: skip

    # The new configuration: the sweep publishes into the broker, the waiting embedded
    # messages move there while the old process still dispatches them.
    new_env = service_env(
        settings.database_url, outbox, REMINDERS_QUEUE=kind, **common, **variables
    )
    broker = broker_publisher(pull_queue, settings)
    try:
        container.publisher = broker
        await _register(client, "new", AFTER_CUTOVER, start)
        assert (await sweep(client))["messages"] == AFTER_CUTOVER
        moved = _move_embedded(new_env, tmp_path)
        assert moved["returned_to_sweep"] >= DUE_LATER
        assert moved["published"] + moved["returned_to_sweep"] <= embedded_total
        worker = Process([REMINDERS, "worker"], new_env, tmp_path / "worker.log").start()
        processes.append(worker)
        due = DUE_NOW + DUE_SOON + AFTER_CUTOVER - (moved["returned_to_sweep"] - DUE_LATER)
        await wait_until(lambda: _sent_at_least(ledger, due), timeout=120, what="all due sent",
                         processes=(worker, old))  # fmt: skip
        old.signal(signal.SIGTERM)  # the rolling deploy retires the old replica
        assert await old.wait_exit(60) in (0, -signal.SIGTERM), old.output()
        assert await _embedded_ready(ledger) == 0
        assert await _states(ledger, "later:") == {"scheduled": DUE_LATER}
        # (On a machine too slow to move the "soon" ones within the broker's horizon, they
        # went back to the sweep as well: the sweep below publishes them, still once each.)

        # An hour on, the sweep publishes the returned reminders into the broker. (The
        # worker is stopped across that sweep: moto's SQS can drop a message sent while
        # another is being deleted — its queue is rebuilt without a lock — which real SQS
        # does not; the catch-up would only resend it 30 minutes later.)
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(30) == 0, worker.output()
        clock.set(start + timedelta(hours=1) - timedelta(seconds=2))
        total = DUE_NOW + DUE_SOON + DUE_LATER + AFTER_CUTOVER
        assert (await sweep(client))["messages"] == total - due
        worker = Process([REMINDERS, "worker"], new_env, tmp_path / "worker-2.log").start()
        processes.append(worker)
        await wait_until(lambda: _sent_at_least(ledger, total), timeout=120,
                         what="the returned reminders sent", processes=(worker,))  # fmt: skip
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(30) == 0, worker.output()
    finally:
        await close_publisher(broker)

    rows = await ledger.rows()
    assert len(rows) == total and {row["state"] for row in rows} == {"sent"}
    assert len(_emails(outbox)) == total  # counted at the provider: nobody got two


async def _register(client, prefix: str, count: int, due_at: datetime) -> None:
    for n in range(count):
        await put_reminder(client, f"{prefix}:{n}", customer_id="cust_1", due_at=due_at)


def _move_embedded(env: dict[str, str], tmp_path: Path) -> dict[str, int]:
    done = subprocess.run(
        [REMINDERS, "move-embedded"], env=env, capture_output=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def _sent_at_least(ledger, count: int) -> bool:
    return await ledger.sent() >= count


async def _embedded_ready(ledger) -> int:
    return (await ledger.queue())["ready"]


async def _states(ledger, prefix: str) -> dict[str, int]:
    from app.db.tables import reminders

    query = (
        select(reminders.c.state, func.count())
        .where(reminders.c.id.startswith(prefix))
        .group_by(reminders.c.state)
    )
    async with ledger.engine.connect() as conn:
        return {state: int(n) for state, n in await conn.execute(query)}


def _emails(outbox: Path) -> list[Path]:
    return list(outbox.rglob("*.eml"))
