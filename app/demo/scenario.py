"""The demo scenario: every path a reminder can take, through the real service.

One process runs the service on a loopback port (uvicorn, the real app), the embedded
queue's dispatcher, and a webhook endpoint that fails on purpose. Reminders are
registered over the HTTP API, swept by ``POST /cron/sweep``, pushed by the dispatcher
over HTTP to ``/push/reminders`` and sent by the outbox (email) and signed-webhook
providers. A travelling clock, shared by every component, stands in for waiting days.
"""

from __future__ import annotations

import asyncio
import socket
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from pydantic import SecretStr

from app.adapters.queues.embedded.configured import dispatcher_from_settings
from app.adapters.queues.embedded.pusher import PushResult
from app.adapters.queues.embedded.settings import EmbeddedQueueSettings
from app.container import open_container
from app.db import queue_repo, summary_repo
from app.demo.cases import CASES, STEPS, Case, DemoResult, format_offset
from app.demo.clock import TravelClock
from app.demo.endpoint import WebhookEndpoint
from app.domain.errors import ReminderRelayError
from app.main import create_app
from app.settings import Settings
from app.settings.secrets import DEV_CHANNEL_SECRETS

# The demo's own credentials, whatever REMINDERS_* the environment holds.
API_TOKEN, CRON_TOKEN = "demo-api-token", "demo-cron-token"
API = {"Authorization": f"Bearer {API_TOKEN}"}
CRON = {"Authorization": f"Bearer {CRON_TOKEN}"}


class DatabaseInUse(ReminderRelayError):
    """The demo runs only on an empty database: it must not mix with real reminders."""


@dataclass
class Demo:
    """Runs the scenario; ``on_step`` hears each step's name, ``on_event`` each notable event."""

    directory: Path
    database_url: str
    on_step: Callable[[str], None] = lambda _step: None
    on_event: Callable[[str], None] = lambda _event: None
    clock: TravelClock = field(default_factory=TravelClock)
    answers: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    async def run(self) -> DemoResult:
        """Run every step; the service, the dispatcher and the endpoint stop whatever happens."""
        self.start = self.clock()
        self.on_step(STEPS[0])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        settings = self._settings(base_url)
        async with open_container(settings, clock=self.clock) as self.container:
            await self._refuse_used_database()
            self.endpoint = WebhookEndpoint()
            await self.endpoint.start()
            self.container.close_with(self.endpoint.stop)
            self.dispatcher, pusher = dispatcher_from_settings(
                settings, self.container.engine, clock=self.clock, rand=self.container.receiver.rand
            )
            if pusher is not None:
                self.container.close_with(pusher.close)
            return await self._serve(sock, base_url)

    async def _serve(self, sock: socket.socket, base_url: str) -> DemoResult:
        server = uvicorn.Server(
            uvicorn.Config(
                create_app(container=self.container, background=False),
                log_level="error",
                access_log=False,
                loop="asyncio",
            )
        )
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            await _until_started(server, serving)
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as self.api:
                await self._scenario()
                return await self._result()
        finally:
            server.should_exit = True
            await serving

    async def _refuse_used_database(self) -> None:
        async with self.container.engine.connect() as conn:
            if await summary_repo.ledger_rows(conn):
                raise DatabaseInUse("the demo needs an empty database; this one has reminders")

    def _settings(self, base_url: str) -> Settings:
        return Settings(
            dev_mode=True,
            api_token=SecretStr(API_TOKEN),
            cron_token=SecretStr(CRON_TOKEN),
            admin_token=SecretStr("demo-admin-token"),
            push_secrets=[SecretStr("demo-push-secret")],
            webhook_signing_secret=SecretStr(DEV_CHANNEL_SECRETS["webhook_signing_secret"]),
            database_url=self.database_url,
            queue="embedded",
            queue_name="reminders",
            public_base_url=base_url,
            embedded=EmbeddedQueueSettings(
                push_base_url=base_url, dispatch_in_serve=False, sweep_interval_seconds=0
            ),
            outbox_dir=self.directory / "outbox",
            email_provider="outbox",
            webhook_provider="webhook",
            webhook_allowed_targets=["127.0.0.1"],  # the demo endpoint is on loopback
            max_attempts=3,
            backoff_base_seconds=10,
            backoff_cap_seconds=600,
            log_level="ERROR",
        )

    async def _scenario(self) -> None:
        await self._dispatcher_dies_after_a_push()
        self.on_step(STEPS[2])
        for case in CASES[:-1]:
            await self._register(case)
        self.on_step(STEPS[3])
        await self._sweep()
        await self._announce_waiting()
        self.on_step(STEPS[4])
        await self._change_plans()
        self.on_step(STEPS[5])
        await self._advance(timedelta(minutes=5))
        for step, offset in zip(
            STEPS[6:],
            (timedelta(hours=1), timedelta(hours=3), timedelta(days=6), timedelta(days=8)),
            strict=True,
        ):
            self.on_step(step)
            await self._advance(offset + timedelta(minutes=5))

    async def _dispatcher_dies_after_a_push(self) -> None:
        self.on_step(STEPS[1])
        case = CASES[-1]
        await self._register(case)
        await self._sweep()
        claimed = await self.dispatcher.claim(self.clock())
        results = await self.dispatcher.push_all(claimed)
        self._record(results)
        self.on_event(
            f"{case.reminder_id}: pushed and sent, then the dispatcher 'died' before deleting"
        )

    async def _register(self, case: Case) -> None:
        customer = case.reminder_id.replace("demo:", "cust-")
        body: dict[str, Any] = {"email": f"{customer}@example.com"}
        if case.webhook:
            body["webhook_url"] = self.endpoint.url(case.webhook)
        await self._call("PUT", f"/v1/customers/{customer}", body)
        await self._put_reminder(
            case.reminder_id, customer, self.start + case.due_in, case.channels
        )

    async def _put_reminder(
        self, reminder_id: str, customer: str, due_at: datetime, channels: tuple[str, ...]
    ) -> None:
        body = {
            "customer_id": customer,
            "kind": "renewal",
            "due_at": due_at.isoformat(),
            "channels": list(channels),
            "data": {"name": customer, "plan": "Pro plan"},
        }
        await self._call("PUT", f"/v1/reminders/{reminder_id}", body)

    async def _change_plans(self) -> None:
        await self._call("DELETE", "/v1/reminders/demo:cancelled")
        await self._put_reminder(
            "demo:rescheduled", "cust-rescheduled", self.start + timedelta(hours=3), ("email",)
        )
        await self._call(
            "PUT",
            "/v1/customers/cust-unsubscribed",
            {"email": "cust-unsubscribed@example.com", "unsubscribed": True},
        )
        self.on_event("cancelled one, moved one to +3 h, unsubscribed one customer")

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        response = await self.api.request(method, path, json=body, headers=API)
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text}")
        return dict(response.json())

    async def _sweep(self) -> None:
        response = await self.api.post("/cron/sweep", headers=CRON)
        report = response.json()
        self.on_event(
            f"sweep at {self._ago()}: {report['enqueued']} reminders enqueued "
            f"({report['messages']} messages), {report['remaining']} left in the horizon"
        )

    async def _advance(self, offset: timedelta) -> None:
        """Travel to start + offset in jumps to each next due message, sweeping like a cron."""
        target = self.start + offset
        await self._drain(target)
        self.clock.travel_to(target)
        await self._sweep()
        await self._drain(self.clock())

    async def _drain(self, until: datetime) -> None:
        for _ in range(10_000):  # bounded: a bug must not spin forever
            claimed = await self.dispatcher.claim(self.clock())
            if claimed:
                results = await self.dispatcher.push_all(claimed)
                await self.dispatcher.apply(results, now=self.clock())
                self._record(results)
                continue
            async with self.container.engine.connect() as conn:
                upcoming = await queue_repo.next_visible_at(conn)
            if upcoming is None or upcoming > until:
                return
            self.clock.travel_to(upcoming)

    def _record(self, results: list[PushResult]) -> None:
        for result in results:
            payload = result.message.payload
            reminder_id, channel = str(payload.get("reminder_id")), str(payload.get("channel"))
            label = result.outcome or f"http {result.status}"
            self.answers[f"{reminder_id} {channel}"].append(label)
            self.on_event(f"{self._ago()}  {reminder_id} ({channel}) → {label}")

    async def _announce_waiting(self) -> None:
        for case in CASES:
            state = (await self._call("GET", f"/v1/reminders/{case.reminder_id}"))["state"]
            if state == "scheduled":
                self.on_event(f"{case.reminder_id} stays {state}: beyond the 7-day horizon")

    def _ago(self) -> str:
        return format_offset(self.clock() - self.start)

    async def _result(self) -> DemoResult:
        async with self.container.engine.connect() as conn:
            rows = await summary_repo.ledger_rows(conn)
            counts = await summary_repo.outcome_counts(conn)
            dead = await summary_repo.dead_letter_count(conn)
            queue = await queue_repo.count_by_state(conn)
        return DemoResult(
            rows=rows,
            counts=counts,
            dead_letters=dead,
            queue=queue,
            answers=dict(self.answers),
            paths={case.reminder_id: case.path for case in CASES},
            webhook_requests=dict(self.endpoint.requests),
            outbox=(self.directory / "outbox").resolve(),
            started_at=self.start,
        )


async def _until_started(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    for _ in range(3000):  # up to 30 s
        if server.started:
            return
        if serving.done():
            serving.result()  # raises what stopped the server
            break
        await asyncio.sleep(0.01)
    raise RuntimeError("the service did not start")
