"""``reminders worker`` as a real process. With ``PROMETHEUS_MULTIPROC_DIR`` set as in the
image, its per-queue metrics land in that directory, where ``serve``'s ``/metrics`` in the
same container merges them (read here the way that merge reads them); alone, it serves its
own ``/metrics`` on ``REMINDERS_WORKER_METRICS_PORT``."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.e2e.processes import REMINDERS, Process, free_port, service_env, wait_until
from tests.support.pull_queues import broker_publisher, enqueue_due_now, worker_series_in

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

COUNT = 5


@pytest.fixture
async def publisher(pull_queue, settings):
    """The real publisher of the kind, so the sweep publishes into the broker."""
    from app.adapters.queues.registry import close_publisher

    built = broker_publisher(pull_queue, settings)
    yield built
    await close_publisher(built)


def worker_series(directory: Path, queue: str) -> dict[str, float]:
    """The worker's series of one queue in the shared metrics directory: each event's
    count (summed over processes) and the backlog."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))
    found: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.labels.get("queue") != queue:
                continue
            if sample.name == "reminders_worker_messages_total":
                event = sample.labels["event"]
                found[event] = found.get(event, 0.0) + sample.value
            elif sample.name == "reminders_worker_queue_backlog":
                found["backlog"] = sample.value
    return found


async def test_worker_process_metrics_reach_the_shared_metrics_directory(
    pull_queue, client, clock, settings, ledger, processes, tmp_path
):
    """Five reminders through a worker process: received 5, acked 5, backlog 0."""
    kind, queue, variables = pull_queue
    await enqueue_due_now(client, clock, COUNT)
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    env = service_env(
        settings.database_url, tmp_path / "worker-outbox", REMINDERS_QUEUE=kind,
        REMINDERS_QUEUE_NAME=queue, REMINDERS_WEBHOOK_PROVIDER="outbox",
        PROMETHEUS_MULTIPROC_DIR=str(metrics), **variables,
    )  # fmt: skip
    worker = Process([REMINDERS, "worker"], env, tmp_path / "worker.log").start()
    processes.append(worker)

    async def settled() -> bool:
        series = worker_series(metrics, queue)
        return series.get("acked") == COUNT and series.get("backlog") == 0

    await wait_until(settled, timeout=120, what="5 acked, backlog 0", processes=(worker,))
    worker.signal(signal.SIGTERM)
    assert await worker.wait_exit(30) == 0, worker.output()
    assert await ledger.sent() == COUNT
    series = worker_series(metrics, queue)
    assert (series["received"], series["acked"], series["backlog"]) == (COUNT, COUNT, 0)
    assert "nacked" not in series and "failed" not in series


METRICS_TOKEN = "test-metrics-token-6a3f1c9e7d5b2a8f0e4c"  # service_env's


async def test_a_worker_alone_serves_its_own_metrics(
    pull_queue, client, clock, settings, ledger, processes, tmp_path
):
    """No serve beside it, no shared directory: REMINDERS_WORKER_METRICS_PORT opens the
    worker's own /metrics, behind the metrics token; it closes with the worker."""
    kind, queue, variables = pull_queue
    await enqueue_due_now(client, clock, COUNT)
    port = free_port()
    env = service_env(
        settings.database_url, tmp_path / "worker-outbox", REMINDERS_QUEUE=kind,
        REMINDERS_QUEUE_NAME=queue, REMINDERS_WEBHOOK_PROVIDER="outbox",
        REMINDERS_WORKER_METRICS_PORT=str(port), REMINDERS_WORKER_METRICS_HOST="127.0.0.1",
        **variables,
    )  # fmt: skip
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    worker = Process([REMINDERS, "worker"], env, tmp_path / "worker.log").start()
    processes.append(worker)
    url = f"http://127.0.0.1:{port}/metrics"
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with httpx.AsyncClient(timeout=10) as http:

        async def settled() -> bool:
            try:
                answer = await http.get(url, headers=bearer)
            except httpx.TransportError:  # not listening yet
                return False
            return worker_series_in(answer.text, queue).get("acked") == COUNT

        await wait_until(settled, timeout=120, what="5 acked on /metrics", processes=(worker,))
        assert (await http.get(url)).status_code == 401
        answer = await http.get(url, headers=bearer)
        assert "process_cpu_seconds_total" in answer.text
        assert worker_series_in(answer.text, queue)["received"] == COUNT
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(30) == 0, worker.output()
        with pytest.raises(httpx.TransportError):
            await http.get(url, headers=bearer)
    assert await ledger.sent() == COUNT
