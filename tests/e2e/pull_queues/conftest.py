"""The drills on pull queues run once per kind: the real RabbitMQ and moto's SQS server, each
on a uniquely named queue."""

from __future__ import annotations

import pytest

from tests.support.pull_queues import KINDS, pull_queue_for


@pytest.fixture(params=KINDS)
def pull_queue(request) -> tuple[str, str, dict[str, str]]:
    """(kind, queue name, the worker's variables) for each pull queue kind."""
    return pull_queue_for(request)


@pytest.fixture
def settings(settings, pull_queue):
    """The test's settings on the kind's queue."""
    _, queue, _ = pull_queue
    return settings.model_copy(update={"queue_name": queue})
