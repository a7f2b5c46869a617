"""Drills of issue 19, point 4, through HTTP push with two replicas, counted at the
providers (aiosmtpd's DATA by Message-ID, the webhook endpoint's POSTs by webhook-id).

2,000 reminders x (email, webhook) wait in the embedded queue on a PostgreSQL cluster of
the test's own. Two ``reminders serve`` processes (the replicas) each run the embedded
dispatcher, pushing over HTTP to a push endpoint that hands the pushes to the replicas'
``/push`` in turn, as a load balancer would, and records every answer. A quarter of the
way in, the cluster is restarted (``pg_ctl restart -m fast``) or stopped for 12 s and
started again. Each drill: 0 lost (every send received and recorded sent), 0 sent twice,
and no 5xx answer other than 503 (with Retry-After) from either replica.

The 12 s outage runs a second time with each replica's dispatcher delivering in process
(``REMINDERS_EMBEDDED_DELIVER_IN_PROCESS=true``, the default), so the dispatcher's own
push timeout around the receiver is in a drill too. There nothing reaches the balancer;
the in-process counterpart of a 500 (a delivery that raised, logged as ``in-process
delivery of ... failed``) is counted in the replicas' logs and must stay at 0.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import func, insert, select

from app.db.engine import create_engine
from app.db.migrations import upgrade_to_head
from app.db.queue_tables import queue_messages
from app.db.tables import send_records
from tests.conftest import REAL_MAIL_ENV
from tests.e2e.processes import Process, free_port, serve, service_env, wait_healthy
from tests.support.channel_servers import WebhookSink, smtp_server
from tests.support.channel_servers import serve as serve_app
from tests.support.ledger_states import seed_enqueued
from tests.support.own_postgres import OwnPostgres, own_postgres

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(600)]

COUNT = 2000
CHANNELS = ("email", "webhook")
UNSUBSCRIBE_SECRET = "Zr4Kp8Wq2Tn6Yb0Lx5Mv9Hc3Jd7Gf1SaE8u"
# The lease outlasts the outage (a finalize after an accepted send is retried while its
# lease lasts); the push and visibility timeouts exceed the provider timeout plus the lease.
TIMINGS = {
    "REMINDERS_LEASE_SECONDS": "30",
    "REMINDERS_PROVIDER_TIMEOUT_SECONDS": "5",
    "REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS": "40",
    "REMINDERS_EMBEDDED_VISIBILITY_TIMEOUT_SECONDS": "45",
}


@pytest.fixture
def cluster(db_backend) -> AsyncIterator[OwnPostgres]:
    """A cluster of this test's own, migrated."""
    if db_backend != "postgresql":
        pytest.skip("the drills restart a PostgreSQL cluster")
    with own_postgres() as pg:
        upgrade_to_head(pg.url)
        yield pg


class Balancer:
    """Hands each push to the next replica in turn and records every answer's status."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.statuses: collections.Counter[int] = collections.Counter()
        self.unreachable: collections.Counter[str] = collections.Counter()  # by error
        self._turn = 0
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/push/{queue}", self._push)
        app.on_cleanup.append(self._close)
        return app

    async def _push(self, request: web.Request) -> web.Response:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        target = self.targets[self._turn % len(self.targets)]
        self._turn += 1
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("x-")}
        headers["content-type"] = request.headers.get("content-type", "application/json")
        try:
            async with self._session.post(f"{target}{request.path_qs}", data=body,
                                          headers=headers) as answer:  # fmt: skip
                payload = await answer.read()
                self.statuses[answer.status] += 1
                kept = {k: v for k, v in answer.headers.items() if k.lower() == "retry-after"}
                return web.Response(status=answer.status, body=payload, headers=kept)
        except (aiohttp.ClientError, TimeoutError) as error:
            self.unreachable[type(error).__name__] += 1  # which error says why
            return web.Response(status=502)

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()


async def run_drill(
    cluster: OwnPostgres,
    tmp_path: Path,
    event: Callable[[], Awaitable[None]],
    *,
    in_process: bool = False,
) -> dict[str, float]:
    """Deliver everything through both replicas while ``event`` happens; the figures.
    ``in_process``: each replica's dispatcher calls its own receiver, no HTTP push."""
    sink, balancer = WebhookSink(), Balancer()
    engine = create_engine(cluster.url)
    replicas: list[Process] = []
    try:
        with smtp_server() as smtp:
            async with serve_app(sink.app()) as sink_url, serve_app(balancer.app()) as lb_url:
                ids = await seed_enqueued(
                    engine, COUNT, channels=CHANNELS, email="ada@example.com",
                    webhook_url=f"{sink_url}/hook",
                )  # fmt: skip
                env = service_env(
                    cluster.url, tmp_path / "outbox", **TIMINGS,
                    REMINDERS_EMBEDDED_DELIVER_IN_PROCESS=str(in_process).lower(),
                    REMINDERS_EMBEDDED_PUSH_BASE_URL=lb_url,
                    **REAL_MAIL_ENV, REMINDERS_EMAIL_PROVIDER="smtp", REMINDERS_SMTP_HOST=smtp.host,
                    REMINDERS_SMTP_PORT=str(smtp.port), REMINDERS_SMTP_SECURITY="none",
                    REMINDERS_USEFULNESS_GRACE_SECONDS=str(10**9),
                    REMINDERS_UNSUBSCRIBE_SECRET=UNSUBSCRIBE_SECRET,
                )  # fmt: skip
                for n in range(2):
                    port = free_port()
                    replica = serve(env, port, tmp_path / f"replica-{n}.log").start()
                    replicas.append(replica)
                    await wait_healthy(f"http://127.0.0.1:{port}", replica, timeout=60)
                    balancer.targets.append(f"http://127.0.0.1:{port}")
                figures = await _deliver(engine, ids, smtp, sink, event, replicas)
        figures.update(_counted(smtp, sink, balancer))
        figures["in_process"] = in_process
        figures["in_process_failures"] = sum(_in_process_failures(r) for r in replicas)
        async with engine.connect() as conn:
            sent = select(func.count()).where(send_records.c.state == "sent")
            figures["recorded_sent"] = (await conn.execute(sent)).scalar_one()
    finally:
        for replica in replicas:
            replica.stop()
        await engine.dispose()
    print("drill figures:", figures)  # the closing note quotes them
    return figures


async def _deliver(engine, ids, smtp, sink, event, replicas) -> dict[str, float]:
    started = time.monotonic()
    await _enqueue(engine, ids)
    while len(smtp.handler.messages) + len(sink.received) < COUNT // 2:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    at = time.monotonic()
    await event()
    event_s = time.monotonic() - at
    deadline = time.monotonic() + 300
    while not await _all_done(engine, smtp, sink):
        for replica in replicas:
            assert replica.popen is not None and replica.popen.poll() is None, replica.output()
        if time.monotonic() > deadline:
            logs = "\n".join(r.output() for r in replicas)
            raise AssertionError(f"not every send arrived: {len(smtp.handler.messages)} "
                                 f"emails, {len(sink.received)} webhooks\n{logs}")  # fmt: skip
        await asyncio.sleep(0.5)
    total_s = time.monotonic() - started
    await asyncio.sleep(2)  # a late second send would arrive now
    return {"event_at_s": at - started, "event_s": event_s, "total_s": total_s}


async def _enqueue(engine, ids: list[str]) -> None:
    """Every (reminder, channel) as a ready message of the embedded queue, as the sweep
    leaves them."""
    now = datetime.now(UTC)
    async with engine.begin() as conn:
        await conn.execute(
            insert(queue_messages),
            [
                dict(
                    queue="reminders", message_id=f"{rid}:{channel}",
                    payload={"v": 1, "reminder_id": rid, "channel": channel,
                             "schedule_version": 1},
                    idempotency_key=f"{rid}:{channel}:v1", state="ready", visible_at=now,
                    attempts=0, max_retries=16, created_at=now,
                    expires_at=now + timedelta(days=30),
                )
                for rid in ids
                for channel in CHANNELS
            ],
        )  # fmt: skip


async def _all_done(engine, smtp, sink) -> bool:
    if len(smtp.handler.messages) < COUNT or len(sink.received) < COUNT:
        return False
    try:
        async with engine.connect() as conn:
            waiting = select(func.count()).select_from(queue_messages)
            return int((await conn.execute(waiting)).scalar_one()) == 0
    except Exception:  # the cluster is still coming back
        return False


def _counted(smtp, sink, balancer: Balancer) -> dict[str, float]:
    emails = collections.Counter(m["Message-ID"] for m in smtp.handler.messages)
    hooks = collections.Counter(r["headers"]["webhook-id"] for r in sink.received)
    return {
        "emails": len(emails), "webhooks": len(hooks),
        "emails_twice": sum(1 for n in emails.values() if n > 1),
        "webhooks_twice": sum(1 for n in hooks.values() if n > 1),
        "pushes": sum(balancer.statuses.values()),
        "answers": dict(balancer.statuses),
        "5xx_not_503": sum(n for s, n in balancer.statuses.items() if s >= 500 and s != 503),
        "unreachable": sum(balancer.unreachable.values()),
        "unreachable_by_error": dict(balancer.unreachable),
    }  # fmt: skip


def _in_process_failures(replica: Process) -> int:
    """Deliveries the dispatcher saw raise (what the push route would answer with 500)."""
    lines = replica.log.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if "in-process delivery of" in line and "failed" in line)


def assert_exactly_once(figures: dict) -> None:
    """Every send received once and recorded sent; no replica answered a 5xx but 503
    (in process: no delivery raised, and none went over HTTP)."""
    assert (figures["emails"], figures["webhooks"]) == (COUNT, COUNT)
    assert (figures["emails_twice"], figures["webhooks_twice"]) == (0, 0)
    assert figures["recorded_sent"] == COUNT * len(CHANNELS)
    assert figures["5xx_not_503"] == 0, figures["answers"]
    assert figures["unreachable"] == 0
    assert figures["in_process_failures"] == 0
    if figures["in_process"]:
        assert figures["pushes"] == 0, "the dispatcher pushed over HTTP, not in process"


async def test_a_fast_restart_through_two_replicas_sends_each_once(cluster, tmp_path):
    """``pg_ctl restart -m fast`` mid-run, both replicas pushed over HTTP."""
    figures = await run_drill(cluster, tmp_path, lambda: cluster.apg_ctl("restart", "-m", "fast"))
    assert_exactly_once(figures)


@pytest.mark.parametrize("delivery", ["http-push", "in-process"])
async def test_a_12_s_outage_through_two_replicas_sends_each_once(cluster, tmp_path, delivery):
    """Stopped for 12 s, then started; both replicas pushed over HTTP, or each dispatcher
    delivering to its own receiver in process."""

    async def outage() -> None:
        await cluster.apg_ctl("stop", "-m", "fast")
        await asyncio.sleep(12)
        await cluster.apg_ctl("start")

    in_process = delivery == "in-process"
    assert_exactly_once(await run_drill(cluster, tmp_path, outage, in_process=in_process))
