"""moto's server as its own process on loopback (a port the OS chose), for the SQS tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def sqs_endpoint() -> Iterator[str]:
    """A moto server process; its endpoint URL. The AWS variables point at dummy keys."""
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{endpoint}/moto-api/", timeout=1)
            break
        except httpx.TransportError:
            assert process.poll() is None, "moto_server exited"
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.1)
    saved = {name: os.environ.get(name) for name in (*CREDENTIALS, "AWS_DEFAULT_REGION")}
    os.environ.update({**CREDENTIALS, "AWS_DEFAULT_REGION": REGION})
    try:
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        process.terminate()
        process.wait(10)


@pytest.fixture
async def sqs_queue(sqs_endpoint: str) -> AsyncIterator[str]:
    """A channel queue and its DLQ with the redrive policy, made by the setup code."""
    from app.adapters.queues.sqs.client import SqsClient
    from app.adapters.queues.sqs.setup import create_queues, dead_letter_queue

    name = f"test-{uuid.uuid4().hex[:12]}"
    client = SqsClient(region=REGION, endpoint_url=sqs_endpoint)
    try:
        await create_queues(client, [name], max_receive_count=4)
        yield name
        for queue in (name, dead_letter_queue(name)):
            await client.call("delete_queue", QueueUrl=await client.queue_url(queue))
    finally:
        await client.aclose()
