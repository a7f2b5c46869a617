"""Pull worker settings (prefix ``REMINDERS_WORKER_``), nested in ``Settings.worker``.

The worker (``reminders worker``) serves every pull queue kind: Infrai, SQS, RabbitMQ.
Infrai's own ``REMINDERS_INFRAI_WORKER_*`` knobs (batch size, idle backoff) still apply to
Infrai, which answers a receive at once instead of waiting for messages.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WorkerSettings(BaseSettings):
    """How much the pull worker holds at once and how it waits."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_WORKER_", extra="ignore")

    # Messages leased and not yet settled, across the worker's queues (the bounded
    # prefetch; RabbitMQ's basic.qos).
    max_in_flight: int = Field(default=32, ge=1, le=1000)
    # Long polling: how long one receive waits for a first message (SQS allows up to 20).
    wait_seconds: float = Field(default=10.0, ge=0, le=20)
    # The queue's lease on a received message (SQS visibility timeout); 0: twice the
    # claim lease, so a message never reappears while its claim is trusted.
    visibility_timeout_seconds: int = Field(default=0, ge=0, le=43200)
    # A queue that cannot be reached is called again after a jittered backoff up to this.
    reconnect_max_seconds: float = Field(default=30.0, gt=0)
    # The worker's own GET /metrics (0: none). A worker beside `serve` in one container
    # shares its metrics through PROMETHEUS_MULTIPROC_DIR instead; one that runs alone
    # needs this to be scraped.
    metrics_port: int = Field(default=0, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"

    def visibility_timeout(self, lease_seconds: float) -> int:
        """The queue lease to ask for: configured, else twice the claim lease."""
        return self.visibility_timeout_seconds or int(2 * lease_seconds + 0.999)
