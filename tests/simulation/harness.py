"""Deterministic simulation of the whole pipeline in one process, driven by one seed.

The service's own objects (API over ASGI, sweep, receiver, ledger on a real database)
run against simulated surroundings, all drawn from one ``random.Random(seed)`` and one
``FakeClock``: deliveries run one at a time, so a seed replays exactly.

- the queue (``SimQueue``) is at least once: it delivers visible messages in random order,
  redelivers after a visibility timeout when no answer came (a crash), duplicates, drops
  acknowledgements, honours nacks, and gives up after ``max_deliveries`` into a dead list;
- the providers (``SimProvider``) accept, fail transiently or permanently, time out, or
  accept and then time out (the unknown-outcome window), and count acceptances per key;
- the ledger (``ChaosLedger``) drops the database connection before or after a statement
  (``LedgerUnavailable``) and crashes the delivery by cancelling its task at that await;
- the application creates, reschedules and cancels reminders and opts customers out of
  channels through the API while deliveries run.

After the run, with the chaos switched off, the queue drains; then ``reminders audit``
must pass and no key may have been accepted twice outside the unknown-outcome window.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import select

from app.container import Container
from app.db.tables import send_records
from app.domain.errors import LedgerUnavailable, PermanentProviderError, TransientProviderError
from app.domain.messages import Delivery, RenderedMessage, SendResult
from app.main import create_app
from app.services.audit import AuditReport, run_audit
from app.services.receive import receive_delivery
from tests.support.clock import FakeClock
from tests.support.flow import API

CUSTOMERS = ("c1", "c2", "c3")
CHANNELS = ("email", "webhook")
VISIBILITY = timedelta(seconds=30)


@dataclass
class SimMessage:
    """One message in the simulated queue."""

    message_id: str
    queue: str
    payload: dict[str, Any]
    visible_at: datetime
    deliveries: int = 0


@dataclass
class SimQueue:
    """An at-least-once queue that misbehaves as real ones do, on the seed's dice."""

    rand: random.Random
    clock: FakeClock
    max_deliveries: int = 12
    ready: list[SimMessage] = field(default_factory=list)
    dead: list[SimMessage] = field(default_factory=list)
    chaos: bool = True

    def publish(self, published: Any) -> None:
        """Take a message the service published (maybe twice)."""
        copies = 2 if self.chaos and self.rand.random() < 0.05 else 1
        for copy in range(copies):
            self.ready.append(
                SimMessage(
                    f"{published.message_id}-{copy}", published.queue, dict(published.payload),
                    published.visible_at + timedelta(seconds=self.rand.uniform(0, 5)),
                )
            )  # fmt: skip

    def next_visible(self) -> SimMessage | None:
        """A random message whose time has come (reordering), or None."""
        due = [m for m in self.ready if m.visible_at <= self.clock.now]
        return self.rand.choice(due) if due else None

    def answered(self, message: SimMessage, acknowledged: bool, retry_after: float | None) -> None:
        """Apply the receiver's answer (None: no answer came)."""
        if acknowledged and not (self.chaos and self.rand.random() < 0.05):  # ack not lost
            self.ready.remove(message)
            return
        delay = VISIBILITY if retry_after is None else timedelta(seconds=retry_after)
        message.visible_at = self.clock.now + delay
        if message.deliveries >= self.max_deliveries:
            self.ready.remove(message)
            self.dead.append(message)

    def next_wakeup(self) -> datetime | None:
        """When the next message becomes visible."""
        return min((m.visible_at for m in self.ready), default=None)


@dataclass
class SimProvider:
    """A provider that accepts, fails or times out on the seed's dice."""

    name: str
    rand: random.Random
    accepted: Counter[str] = field(default_factory=Counter)
    unknown_outcome: set[str] = field(default_factory=set)
    chaos: bool = True

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """One provider call."""
        roll = self.rand.random() if self.chaos else 0.0
        if roll > 0.95:
            raise TransientProviderError("503 from the provider")
        if roll > 0.93:
            raise PermanentProviderError("address rejected")
        if roll > 0.90:
            raise TransientProviderError("timed out", detail_class="timeout")
        self.accepted[idempotency_key] += 1
        if roll > 0.87:  # accepted, but the answer never came
            self.unknown_outcome.add(idempotency_key)
            raise TransientProviderError("timed out after sending", detail_class="timeout")
        return SendResult(f"{self.name}-{idempotency_key}-{self.accepted[idempotency_key]}")


class ChaosLedger:
    """The real ledger gateway with dropped connections and crashes at its awaits."""

    def __init__(self, inner: Any, rand: random.Random) -> None:
        self.inner = inner
        self.rand = rand
        self.chaos = True
        self.crashes = 0
        self.drops = 0
        # Send records whose worker died between the provider's acceptance and the finalize:
        # the documented window a provider's idempotency key closes (counted apart).
        self.died_before_finalize: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(method):
            return method

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                await self._maybe_fail(before=True)
            except asyncio.CancelledError:
                if name.startswith("finalize"):
                    self.died_before_finalize.add(args[0].id)
                raise
            result = await method(*args, **kwargs)
            await self._maybe_fail(before=False)
            return result

        return call

    async def _maybe_fail(self, *, before: bool) -> None:
        if not self.chaos:
            return
        roll = self.rand.random()
        if roll < 0.02:
            self.drops += 1
            raise LedgerUnavailable(f"connection dropped {'before' if before else 'after'}")
        if roll < 0.04:
            self.crashes += 1
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # the process dies at this await
            await asyncio.sleep(0)


# Audit checks that a crash injected by the simulation trips by design.
CHAOS_REPORTED = frozenset({"reclaimed_without_outcome", "provider_called_twice"})


@dataclass
class SimResult:
    """What one seed's run left behind."""

    seed: int
    audit: AuditReport
    sent_twice: list[str]
    unknown_window: int
    deliveries: int
    crashes: int
    drops: int
    dead_in_queue: int

    @property
    def ok(self) -> bool:
        """The audit passes and no key was accepted twice outside the unknown window.

        The attempt-history checks report the chaos itself (a crashed worker's attempt has no
        outcome and may have called the provider): this run counts what the provider really
        accepted (``sent_twice``) instead."""
        held = {
            name: ids
            for name, ids in self.audit.violations.items()
            if name not in CHAOS_REPORTED and ids
        }
        return not held and not self.sent_twice


class Simulation:
    """One seed's run over a container built for it."""

    def __init__(self, container: Container, seed: int, clock: FakeClock) -> None:
        self.rand = random.Random(seed)
        self.seed = seed
        self.clock = clock
        self.container = container
        # Some seeds' queues give up early (as a Pub/Sub dead-letter policy or Cloud Tasks'
        # last attempt does): the sweep's catch-up must bring those reminders back.
        self.queue = SimQueue(self.rand, clock, max_deliveries=self.rand.choice((2, 4, 12)))
        self.providers = {name: SimProvider(name, self.rand) for name in CHANNELS}
        self.ledger = ChaosLedger(container.receiver.ledger, self.rand)
        container.receiver = dataclasses.replace(
            container.receiver,
            providers=self.providers,
            ledger=self.ledger,
            sleep=self._sleep,
            renewal_sleep=self._no_renewal_due,
        )
        self.reminders: list[str] = []
        self.deliveries = 0

    async def _sleep(self, seconds: float) -> None:
        self.clock.advance(seconds=seconds)  # simulated time passes at once

    async def _no_renewal_due(self, _seconds: float) -> None:
        """A simulated call takes no simulated time, so no lease runs low while one is in
        flight: the keeper's timer never fires. (Firing at once, it would renew as often as
        the database's real latency allows, a count no seed could replay.)"""
        await asyncio.Future()  # until the keeper stops it

    async def run(self, steps: int) -> SimResult:
        """``steps`` random actions, then a calm drain, then the checks."""
        app = create_app(container=self.container)
        app.state.container = self.container
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
            for customer in CUSTOMERS:
                body = {
                    "email": f"{customer}@example.com",
                    "webhook_url": "https://hooks.example.com/x",
                }
                await client.put(f"/v1/customers/{customer}", json=body, headers=API)
            for step in range(steps):
                await self._act(client, step)
            await self._drain(client)
        return await self._result()

    async def _act(self, client: httpx.AsyncClient, step: int) -> None:
        roll = self.rand.random()
        if roll < 0.25:
            await self._create(client, f"r{step}")
        elif roll < 0.30 and self.reminders:
            await self._reschedule(client, self.rand.choice(self.reminders))
        elif roll < 0.34 and self.reminders:
            await client.delete(f"/v1/reminders/{self.rand.choice(self.reminders)}", headers=API)
        elif roll < 0.36:
            await self._opt_out(client)
        elif roll < 0.46:
            await self._sweep()
        elif roll < 0.90:
            await self._deliver_one()
        else:
            self.clock.advance(seconds=self.rand.uniform(1, 600))

    async def _create(self, client: httpx.AsyncClient, reminder_id: str) -> None:
        channels = self.rand.choice([["email"], ["webhook"], ["email", "webhook"]])
        due = self.clock.now + timedelta(seconds=self.rand.uniform(0, 3600))
        body = {
            "customer_id": self.rand.choice(CUSTOMERS), "kind": "weekly_digest",
            "channels": channels, "due_at": due.isoformat(), "data": {"n": reminder_id},
        }  # fmt: skip
        response = await client.put(f"/v1/reminders/{reminder_id}", json=body, headers=API)
        if response.status_code in (200, 201):
            self.reminders.append(reminder_id)

    async def _reschedule(self, client: httpx.AsyncClient, reminder_id: str) -> None:
        current = (await client.get(f"/v1/reminders/{reminder_id}", headers=API)).json()
        due = self.clock.now + timedelta(seconds=self.rand.uniform(0, 1800))
        body = {key: current[key] for key in ("customer_id", "kind", "channels", "data")}
        await client.put(
            f"/v1/reminders/{reminder_id}", json=body | {"due_at": due.isoformat()}, headers=API
        )

    async def _opt_out(self, client: httpx.AsyncClient) -> None:
        customer = self.rand.choice(CUSTOMERS)
        body = {
            "email": f"{customer}@example.com", "webhook_url": "https://hooks.example.com/x",
            "opted_out_channels": self.rand.choice([[], ["email"], ["webhook"]]),
        }  # fmt: skip
        await client.put(f"/v1/customers/{customer}", json=body, headers=API)

    async def _sweep(self) -> None:
        await self.container.sweep()
        for published in self.container.publisher.drain():  # type: ignore[attr-defined]
            self.queue.publish(published)

    async def _deliver_one(self) -> None:
        message = self.queue.next_visible()
        if message is None:
            wakeup = self.queue.next_wakeup()
            if wakeup is not None:
                self.clock.set(max(self.clock.now, wakeup))
            return
        message.deliveries += 1
        self.deliveries += 1
        delivery = Delivery(message.queue, message.message_id, message.payload, message.deliveries)
        task = asyncio.create_task(receive_delivery(self.container.receiver, delivery))
        try:
            answer = await task
        except (asyncio.CancelledError, LedgerUnavailable):  # crashed, or a 500
            self.queue.answered(message, False, None)
            return
        self.queue.answered(message, answer.outcome.acknowledges, answer.retry_after)

    async def _drain(self, client: httpx.AsyncClient) -> None:
        self.ledger.chaos = self.queue.chaos = False
        for provider in self.providers.values():
            provider.chaos = False
        margin = self.container.sweep_limits.catch_up.margin
        for _ in range(5000):
            if self.queue.next_visible() is not None:
                await self._deliver_one()
            elif self.queue.ready:
                await self._deliver_one()  # nothing visible: jumps the clock to the next one
            elif not await self._sweep_published():
                # The queue is empty: wait out the catch-up margin, so whatever a queue
                # gave up on is republished by a sweep; nothing republished means done.
                self.clock.set(self.clock.now + margin + timedelta(minutes=1))
                if not await self._sweep_published():
                    break
        self.clock.advance(hours=2)  # past every grace: whatever is open now is lost

    async def _sweep_published(self) -> bool:
        """Sweep; whether anything reached the queue."""
        before = len(self.queue.ready)
        await self._sweep()
        return len(self.queue.ready) > before

    async def _keys_of(self, record_ids: set[int]) -> set[str]:
        if not record_ids:
            return set()
        async with self.container.engine.connect() as conn:
            rows = await conn.execute(
                select(send_records.c.idempotency_key).where(send_records.c.id.in_(record_ids))
            )
            return set(rows.scalars())

    async def _result(self) -> SimResult:
        async with self.container.engine.connect() as conn:
            audit = await run_audit(conn, now=self.clock.now)
        twice, unknown = [], 0
        window = await self._keys_of(self.ledger.died_before_finalize)
        for provider in self.providers.values():
            for key, times in provider.accepted.items():
                if times > 1 and (key in provider.unknown_outcome or key in window):
                    unknown += 1
                elif times > 1:
                    twice.append(key)
        return SimResult(
            self.seed, audit, twice, unknown, self.deliveries, self.ledger.crashes,
            self.ledger.drops, len(self.queue.dead),
        )  # fmt: skip
