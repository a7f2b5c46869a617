"""moto's SNS server (``moto[server]``) on loopback, for the SNS publisher's tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(frozen=True)
class Moto:
    """A running moto server and a view of what its SNS topics received."""

    endpoint_url: str

    def reset(self) -> None:
        """Forget every topic and message (moto's own reset endpoint)."""
        httpx.post(f"{self.endpoint_url}/moto-api/reset").raise_for_status()

    def topic_arn(self, name: str) -> str:
        return f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}"

    def create_topic(self, name: str) -> str:
        """Create a standard topic through the SNS query API; its ARN."""
        response = httpx.post(
            self.endpoint_url,
            data={"Action": "CreateTopic", "Name": name, "Version": "2010-03-31"},
            headers={"Authorization": _FAKE_SIGV4},
        )
        response.raise_for_status()
        return self.topic_arn(name)

    def sent(self, name: str) -> list[tuple[Any, ...]]:
        """(message id, message, subject, attributes, group id) published to a topic, in order.

        moto runs in this process; its backend is the queue's state.
        """
        from moto.sns.models import sns_backends

        topic = sns_backends[ACCOUNT][REGION].topics.get(self.topic_arn(name))
        return list(topic.sent_notifications) if topic is not None else []


_FAKE_SIGV4 = (
    "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sns/aws4_request, "
    "SignedHeaders=host, Signature=0"
)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Moto]:
    """One moto server on 127.0.0.1 for the run."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield Moto(f"http://{host}:{port}")
    finally:
        server.stop()


@pytest.fixture
def moto(moto_server: Moto) -> Moto:
    """The moto server, emptied."""
    moto_server.reset()
    return moto_server
