"""Embedded queue settings (prefix ``REMINDERS_EMBEDDED_``), nested in ``Settings.embedded``."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.domain.retry import BackoffPolicy


class EmbeddedQueueSettings(BaseSettings):
    """How the embedded queue's dispatcher pushes, retries and dead-letters."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_EMBEDDED_", extra="ignore")

    # `reminders serve` runs the dispatcher (and the periodic sweep) in-process when true.
    dispatch_in_serve: bool = True
    # ... and hands each message to the receiver in the same process (no HTTP round trip to
    # itself). False: it POSTs /push/{queue} as `reminders dispatch` does.
    deliver_in_process: bool = True
    # Where the dispatcher POSTs /push/{queue}; default REMINDERS_PUBLIC_BASE_URL, and
    # under `reminders serve` the address it binds.
    push_base_url: str | None = None
    # 128 in flight: measured in process, 20,000 reminders, one run (bench/README.md):
    # PostgreSQL 917 / 1,212 / 1,038 reminders/s at 64 / 128 / 256, SQLite 827 / 1,015 /
    # 945 (concurrent deliveries share bigger group statements and transactions); over
    # HTTP 576 -> 741/s from 64 to 128.
    concurrency: int = Field(default=128, ge=1, le=1024)
    batch_size: int = Field(default=64, ge=1, le=5000)
    poll_interval_seconds: float = Field(default=0.5, gt=0)
    max_retries: int = Field(default=16, ge=0)
    # Unset: derived from the delivery's own bound (``Settings.embedded_push_timeout``);
    # set, it must exceed it (checked there): a push given up sooner is delivered again.
    push_timeout_seconds: float | None = Field(default=None, gt=0)
    visibility_timeout_seconds: float | None = Field(default=None, gt=0)
    backoff_base_seconds: float = Field(default=1.0, gt=0)
    backoff_cap_seconds: float = Field(default=300.0, gt=0)
    # One machine has no cloud cron: serve sweeps this often (0 = rely on POST /cron/sweep).
    sweep_interval_seconds: float = Field(default=30.0, ge=0)

    @property
    def backoff(self) -> BackoffPolicy:
        """Redelivery backoff when the answer carries no Retry-After."""
        return BackoffPolicy(self.backoff_base_seconds, self.backoff_cap_seconds)
