"""Fixtures for tests against the fake Infrai (loaded by ``tests/conftest.py``)."""

from __future__ import annotations

import random
import ssl
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.adapters.queues.infrai.api import InfraiApi, InfraiConfig
from app.domain.retry import BackoffPolicy
from tests.support.clock import FakeClock
from tests.support.fake_infrai import API_KEY, FakeInfrai, serve_fake_infrai


class RecordingSleep:
    """An injected ``sleep``: records each requested delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture(scope="session")
def fake_infrai_server() -> Iterator[FakeInfrai]:
    """One fake Infrai server on a loopback port for the whole run."""
    with serve_fake_infrai(FakeInfrai()) as fake:
        yield fake


@pytest.fixture
def fake_infrai(fake_infrai_server: FakeInfrai, clock: FakeClock) -> FakeInfrai:
    """The fake Infrai, emptied and set to the test's clock."""
    fake_infrai_server.reset(clock)
    return fake_infrai_server


@pytest.fixture(scope="session")
def tls_context() -> ssl.SSLContext:
    """Built once: loading the CA bundle for every client costs ~0.2 s per test."""
    return ssl.create_default_context()


@pytest.fixture
async def infrai_http(tls_context: ssl.SSLContext) -> AsyncIterator[httpx.AsyncClient]:
    """One pooled HTTP client, as the lifespan builds it."""
    async with httpx.AsyncClient(timeout=5, verify=tls_context) as client:
        yield client


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


def make_api(
    client: httpx.AsyncClient,
    base_url: str,
    *,
    sleep: RecordingSleep,
    now: FakeClock | None = None,
    seed: int = 7,
    **config: Any,
) -> InfraiApi:
    """An ``InfraiApi`` on the fake with test-friendly retry settings."""
    values: dict[str, Any] = {
        "base_url": base_url,
        "api_key": SecretStr(API_KEY),
        "max_attempts": 4,
        "backoff": BackoffPolicy(0.5, 8.0, 0.05),
        "max_retry_after_seconds": 30.0,
    }
    values.update(config)
    clock_now = now if now is not None else (lambda: datetime.now().astimezone())
    return InfraiApi(
        client, InfraiConfig(**values), sleep=sleep, rand=random.Random(seed), now=clock_now
    )
