"""The pull queue kinds the end-to-end drills run on: the real RabbitMQ and moto's SQS
server, each with the variables a ``reminders worker`` process needs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sqs_fixtures import REGION

KINDS = ["rabbitmq", "sqs"]
RABBITMQ_MAX_DELAY = 8


def pull_queue_for(request: pytest.FixtureRequest) -> tuple[str, str, dict[str, str]]:
    """(kind, queue name, the worker's variables) for the fixture's parameter."""
    if request.param == "rabbitmq":
        url = request.getfixturevalue("rabbit_url")
        queue = request.getfixturevalue("rabbit_queue")
        return (
            "rabbitmq",
            queue,
            {
                "REMINDERS_RABBITMQ_URL": url,
                "REMINDERS_RABBITMQ_MAX_DELAY_SECONDS": str(RABBITMQ_MAX_DELAY),
            },
        )
    endpoint = request.getfixturevalue("sqs_endpoint")
    queue = request.getfixturevalue("sqs_queue")
    return "sqs", queue, {
        "REMINDERS_SQS_ENDPOINT_URL": endpoint,
        "REMINDERS_SQS_REGION": REGION,
        "REMINDERS_SQS_MAX_RECEIVE_COUNT": "20",
        "REMINDERS_WORKER_VISIBILITY_TIMEOUT_SECONDS": "12",
        "REMINDERS_WORKER_WAIT_SECONDS": "1",
    }  # fmt: skip


def broker_publisher(pull_queue: tuple[str, str, dict[str, str]], settings: Any) -> Any:
    """The real publisher of the kind, so an in-process sweep publishes into the broker."""
    from app.adapters.queues.registry import build_publisher

    kind, _, variables = pull_queue
    configured = settings.model_copy(update={"queue": kind})
    if kind == "rabbitmq":
        configured.rabbitmq.max_delay_seconds = RABBITMQ_MAX_DELAY
    else:
        configured.sqs.endpoint_url = variables["REMINDERS_SQS_ENDPOINT_URL"]
        configured.sqs.region = REGION
    return build_publisher(configured)


async def enqueue_due_now(client: Any, clock: Any, count: int, webhook_url: str = "") -> None:
    """``count`` reminders of one customer due now on the real clock (a worker process runs
    on it), swept into the queue: by email, or to ``webhook_url`` when one is given."""
    from datetime import UTC, datetime

    from tests.support.flow import put_customer, put_reminder, sweep

    clock.set(datetime.now(UTC))
    fields = {"webhook_url": webhook_url} if webhook_url else {}
    channels = ("webhook",) if webhook_url else ("email",)
    await put_customer(client, "cust_1", **fields)
    for n in range(count):
        await put_reminder(
            client, f"r{n}:cust_1", customer_id="cust_1", due_at=clock.now, channels=channels
        )
    assert (await sweep(client))["messages"] == count


def worker_series_in(exposition: str, queue: str) -> dict[str, float]:
    """The pull worker's series of one queue in a /metrics answer: each event's count
    (``reminders_worker_messages_total``) and the backlog."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.labels.get("queue") != queue:
                continue
            if sample.name == "reminders_worker_messages_total":
                found[sample.labels["event"]] = sample.value
            elif sample.name == "reminders_worker_queue_backlog":
                found["backlog"] = sample.value
    return found
