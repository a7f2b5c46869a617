"""The contract suite's own fixtures."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def contract_vhost(rabbit_url: str) -> Iterator[str]:
    """A vhost of its own for the run (the contract's queue name is fixed); deleted after.

    rabbitmqctl takes seconds per call, so one vhost serves the session and each test
    empties its queues instead.
    """
    vhost = f"contract-{uuid.uuid4().hex[:10]}"
    _rabbitmqctl("add_vhost", vhost)
    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield f"{rabbit_url.rstrip('/')}/{vhost}"
    finally:
        _rabbitmqctl("delete_vhost", vhost)


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)
