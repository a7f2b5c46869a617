"""A ``reminders serve`` process in front of a Google emulator, set up by ``reminders setup``."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.processes import (
    API,
    CRON,
    REMINDERS,
    Process,
    free_port,
    serve,
    service_env,
    wait_healthy,
    wait_until,
)
from tests.support.flow import METRICS
from tests.support.google_emulators import EMULATOR_LOCATION, EMULATOR_PROJECT


@dataclass
class Deployment:
    """One service process whose webhook channel goes through a Google queue."""

    base_url: str
    queue: str
    env: dict[str, str]
    server: Process

    async def register(
        self,
        reminder_id: str,
        due: datetime,
        webhook_url: str,
        channels: tuple[str, ...] = ("webhook",),
    ) -> None:
        """A customer with a webhook and one reminder due at ``due`` on ``channels``."""
        async with httpx.AsyncClient(base_url=self.base_url, headers=API, timeout=30) as client:
            customer = f"cust-{reminder_id}"
            answer = await client.put(
                f"/v1/customers/{customer}",
                json={"email": f"{customer}@example.com", "webhook_url": webhook_url},
            )
            assert answer.status_code == 200, answer.text
            answer = await client.put(
                f"/v1/reminders/{reminder_id}",
                json={"customer_id": customer, "kind": "renewal", "due_at": due.isoformat(),
                      "channels": list(channels)},
            )  # fmt: skip
            assert answer.status_code == 201, answer.text

    async def sweep(self) -> dict:
        """POST /cron/sweep."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30) as client:
            answer = await client.post("/cron/sweep", headers=CRON)
        assert answer.status_code == 200, answer.text
        return answer.json()

    async def wait_sent(self, ledger, count: int, *, timeout: float = 60) -> None:
        """Until the ledger holds ``count`` sent rows (fails with the service's output)."""

        async def sent() -> bool:
            return await ledger.sent() == count

        await wait_until(sent, timeout=timeout, what=f"{count} sends", processes=(self.server,))

    async def outcomes(self) -> dict[str, float]:
        """The service's delivery counters by outcome, for this deployment's queue."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10) as client:
            text = (await client.get("/metrics", headers=METRICS)).text
        counts: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "reminders_deliveries_total" and (
                    sample.labels.get("queue") == self.queue
                ):
                    outcome = sample.labels["outcome"]
                    counts[outcome] = counts.get(outcome, 0) + sample.value
        # Every outcome's series exists from startup at zero: only the ones that happened.
        return {outcome: count for outcome, count in counts.items() if count}


def google_env(database_url: str, tmp_path: Path, kind: str, emulator: str, **extra: str) -> dict:
    """The service's environment: webhooks through a fresh ``kind`` queue at ``emulator``."""
    queue = f"e2e-{uuid.uuid4().hex[:10]}"
    variable = "PUBSUB_EMULATOR_HOST" if kind == "pubsub" else "CLOUD_TASKS_EMULATOR_HOST"
    settings = {
        "REMINDERS_QUEUE": kind,
        "REMINDERS_QUEUE_NAME": queue,
        "REMINDERS_PUBSUB_PROJECT": EMULATOR_PROJECT,
        "REMINDERS_CLOUDTASKS_PROJECT": EMULATOR_PROJECT,
        "REMINDERS_CLOUDTASKS_LOCATION": EMULATOR_LOCATION,
        "REMINDERS_PUBSUB_MIN_BACKOFF_SECONDS": "1",
        "REMINDERS_PUBSUB_MAX_BACKOFF_SECONDS": "2",
        "REMINDERS_PUBSUB_ACK_DEADLINE_SECONDS": "10",
        variable: emulator,
    }
    return service_env(database_url, tmp_path / "outbox", **(settings | extra))


def run_setup(env: dict[str, str], kind: str, log: Path) -> None:
    """``reminders setup --queue kind`` as a deployment runs it."""
    done = subprocess.run(
        [REMINDERS, "setup", "--queue", kind],
        env=env | {"COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=log.parent,
    )
    log.write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr


async def start_deployment(
    env: dict[str, str], kind: str, tmp_path: Path, processes: list[Process]
) -> Deployment:
    """Set the queue up, then start ``reminders serve`` with the push URL on its port."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = env | {"REMINDERS_PUBLIC_BASE_URL": base_url}
    run_setup(env, kind, tmp_path / f"setup-{port}.log")
    server = serve(env, port, tmp_path / f"serve-{port}.log").start()
    processes.append(server)
    await wait_healthy(base_url, server)
    return Deployment(base_url, env["REMINDERS_QUEUE_NAME"], env, server)
