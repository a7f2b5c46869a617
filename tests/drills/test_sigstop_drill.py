"""Drill of issue 19, point 4: a ``reminders serve`` process SIGSTOPped past its lease after
it claimed, counted at the providers (aiosmtpd's DATA by Message-ID, the webhook
endpoint's POSTs by webhook-id).

Two real ``reminders serve`` processes, A and B, on PostgreSQL, a 10 s lease. 20 reminders
are pushed to A while a table A needs is locked, so that A holds its claims and waits; A is
stopped (SIGSTOP), the lock goes, the leases run out; the queue redelivers to B (the drill
pushes the same messages), which sends each. Then A is continued (SIGCONT): it must not call
a provider, and nothing answers 500. Two places to hold A:

- ``in_claim`` (email and webhook): the attempts' history (``send_attempts``) is locked. A
  claim appends its attempt in its own statement, so A's claim statements wait in the
  database (the rest queue in A); once the lock goes they run but stay uncommitted, their
  rows locked, until A can answer, as with any process paused mid-transaction.
- ``after_claim`` (email): the suppression list is locked. A's claims commit; each send then
  waits for its suppression lookup, the last step before the provider call, and comes back
  long after its lease: the lease check before the call must refuse it (busy).

Finding 3 of the issue: a process SIGSTOPped past its lease sent 22 s after another worker.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import time

import httpx
import pytest
from sqlalchemy import func, select, text

from app.db.engine import create_engine
from app.db.tables import send_records
from tests.conftest import REAL_MAIL_ENV
from tests.e2e.processes import free_port, serve, service_env, wait_healthy, wait_until
from tests.support.channel_servers import WebhookSink, smtp_server
from tests.support.channel_servers import serve as serve_app
from tests.support.ledger_states import seed_enqueued
from tests.support.push import envelope, signed

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

COUNT = 20
# Where A is held: the table locked, its lock mode, the channels pushed.
HOLDS = {
    "in_claim": ("send_attempts", "SHARE", ("email", "webhook")),
    "after_claim": ("suppressions", "ACCESS EXCLUSIVE", ("email",)),
}
LEASE_SECONDS = 10
UNSUBSCRIBE_SECRET = "u7Qk2Zp9Xw4Rt6Ly1Nb8Vc3Hd5Jf0GsM2aE"


@pytest.mark.parametrize("hold", list(HOLDS))
async def test_a_process_stopped_past_its_lease_does_not_send(
    db_backend, clean_database_url, tmp_path, hold
):
    """Every send once at the providers, by B; A, continued, sends nothing; no 500."""
    if db_backend != "postgresql":
        pytest.skip("two serve processes share PostgreSQL")
    table, mode, channels = HOLDS[hold]
    engine = create_engine(clean_database_url)
    sink = WebhookSink()
    try:
        with smtp_server() as smtp:
            async with serve_app(sink.app()) as sink_url:
                ids = await seed_enqueued(
                    engine, COUNT, channels=channels, email="ada@example.com",
                    webhook_url=f"{sink_url}/hook",
                )  # fmt: skip
                env = service_env(
                    clean_database_url, tmp_path / "outbox",
                    REMINDERS_EMBEDDED_DISPATCH_IN_SERVE="false",
                    **REAL_MAIL_ENV, REMINDERS_EMAIL_PROVIDER="smtp", REMINDERS_SMTP_HOST=smtp.host,
                    REMINDERS_SMTP_PORT=str(smtp.port), REMINDERS_SMTP_SECURITY="none",
                    REMINDERS_LEASE_SECONDS=str(LEASE_SECONDS),
                    REMINDERS_USEFULNESS_GRACE_SECONDS=str(10**9),
                    REMINDERS_UNSUBSCRIBE_SECRET=UNSUBSCRIBE_SECRET,
                )  # fmt: skip
                messages = [(rid, channel) for rid in ids for channel in channels]
                figures = await _drill(engine, env, tmp_path, messages, (table, mode))
        emails = collections.Counter(m["Message-ID"] for m in smtp.handler.messages)
        hooks = collections.Counter(r["headers"]["webhook-id"] for r in sink.received)
        figures.update(
            emails=len(emails), webhooks=len(hooks),
            emails_twice=sum(1 for n in emails.values() if n > 1),
            webhooks_twice=sum(1 for n in hooks.values() if n > 1),
        )  # fmt: skip
        async with engine.connect() as conn:
            sent = select(func.count()).where(send_records.c.state == "sent")
            figures["recorded_sent"] = (await conn.execute(sent)).scalar_one()
    finally:
        await engine.dispose()
    print("drill figures:", figures)
    assert figures["a_5xx_other_than_503"] == 0 and figures["b_500"] == 0
    assert figures["a_statements_held"] > 0, "A held no claim when it was stopped"
    assert figures["a_sent"] == 0, "the stopped process sent after its lease"
    if hold == "after_claim":  # A's committed claims came back too late to use
        assert figures["a_outcomes"].get("busy", 0) > 0
    webhooks = COUNT if "webhook" in channels else 0
    assert (figures["emails"], figures["webhooks"]) == (COUNT, webhooks)
    assert (figures["emails_twice"], figures["webhooks_twice"]) == (0, 0)
    assert figures["recorded_sent"] == COUNT * len(channels)


async def _drill(engine, env, tmp_path, messages, lock: tuple[str, str]) -> dict:
    port_a, port_b = free_port(), free_port()
    a = serve(env, port_a, tmp_path / "a.log").start()
    b = serve(env, port_b, tmp_path / "b.log").start()
    table, mode = lock
    started = time.monotonic()
    try:
        await wait_healthy(f"http://127.0.0.1:{port_a}", a)
        await wait_healthy(f"http://127.0.0.1:{port_b}", b)
        async with httpx.AsyncClient(timeout=120) as client:
            async with engine.connect() as locker:
                await locker.execute(text(f"LOCK TABLE {table} IN {mode} MODE"))
                to_a = [
                    asyncio.create_task(_push(client, port_a, rid, channel))
                    for rid, channel in messages
                ]

                await wait_until(
                    lambda: _waiting_on(engine, table), timeout=60, what="A at the lock",
                    processes=(a,),
                )  # fmt: skip
                await asyncio.sleep(1.0)  # the later pushes join the waiting claims
                held = await _waiting_on(engine, table)
                a.signal(signal.SIGSTOP)
                stopped_at = time.monotonic()
                await locker.commit()
            await asyncio.sleep(LEASE_SECONDS + 2)  # every lease A could hold is over
            to_b = asyncio.create_task(_deliver_all(client, port_b, messages))
            await asyncio.sleep(2)  # B's claims of A's rows wait on A's row locks
            a.signal(signal.SIGCONT)
            a_answers = [await task for task in to_a]
            b_answers = await to_b
            b_done = time.monotonic()
    finally:
        a.signal(signal.SIGCONT)
        a.stop()
        b.stop()
    outcomes = collections.Counter(body.get("outcome") for _, body in a_answers)
    return {
        "a_statements_held": held,
        "stopped_s": b_done - stopped_at, "total_s": time.monotonic() - started,
        "a_answers": dict(collections.Counter(status for status, _ in a_answers)),
        "a_outcomes": dict(outcomes), "a_sent": outcomes["sent"],
        "a_5xx_other_than_503": sum(1 for s, _ in a_answers if s >= 500 and s != 503),
        "b_answers": dict(b_answers), "b_500": b_answers[500],
    }  # fmt: skip


async def _push(client: httpx.AsyncClient, port: int, rid: str, channel: str):
    raw, headers = signed(envelope(rid, channel, message_id=f"{rid}:{channel}"))
    answer = await client.post(
        f"http://127.0.0.1:{port}/push/reminders", content=raw, headers=headers
    )
    return answer.status_code, answer.json()


async def _deliver_all(client, port: int, messages) -> collections.Counter:
    """Push every message to B until each is acknowledged (the queue redelivering)."""
    statuses: collections.Counter[int] = collections.Counter()
    waiting = list(messages)
    deadline = time.time() + 60
    while waiting:
        assert time.time() < deadline, f"B never acknowledged {waiting[:3]}"
        answers = await asyncio.gather(*(_push(client, port, *m) for m in waiting))
        statuses.update(status for status, _ in answers)
        waiting = [m for m, (status, _) in zip(waiting, answers, strict=True) if status != 200]
        if waiting:
            await asyncio.sleep(1)
    return statuses


async def _waiting_on(engine, table: str) -> int:
    """A's statements waiting for the drill's lock on ``table``."""
    query = text(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = CAST(:t AS regclass)"
    )
    async with engine.connect() as conn:
        return int((await conn.execute(query, {"t": table})).scalar_one())
