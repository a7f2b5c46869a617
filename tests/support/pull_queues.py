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
