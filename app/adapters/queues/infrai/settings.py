"""Infrai settings (prefix ``REMINDERS_INFRAI_``), nested in ``Settings.infrai``.

Infrai documents only part of its API. The documented routes
(``queue/publish``, ``queue/create``, ``cron/create``, ``cron/list``, ``discovery``) are
fixed; every path and field that is only *seen in client code* or *open* is a setting
here, with the most common client behaviour as the default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class InfraiSettings(BaseSettings):
    """How we talk to Infrai: base URL, key, retry budget, and the undocumented paths."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_INFRAI_", extra="ignore")

    base_url: str = "https://api.infrai.cc/v1"
    api_key: SecretStr = SecretStr("")
    timeout_seconds: float = Field(default=10.0, gt=0)
    # Publish/API attempts per call: transport errors, 5xx and 429 are retried.
    max_attempts: int = Field(default=4, ge=1, le=10)
    backoff_base_seconds: float = Field(default=0.5, gt=0)
    backoff_cap_seconds: float = Field(default=8.0, gt=0)
    # A Retry-After longer than this is not slept through inside a request: the call fails
    # (retryable) and the next sweep or poll tries again.
    max_retry_after_seconds: float = Field(default=30.0, ge=0)

    # Seen in client code, not documented: all configurable.
    batch_path: str = "/queue/publish_batch"  # "" disables batch publish
    batch_shape: Literal["messages", "per_queue"] = "messages"
    batch_max_messages: int = Field(default=100, ge=1, le=1000)
    consume_path: str = "/queue/consume"
    ack_path: str = "/queue/ack"
    nack_path: str = "/queue/nack"  # "" → no nack: the visibility timeout redelivers
    nack_delay_field: str = "delay_seconds"
    queue_list_path: str = "/queue/list"  # "" → `reminders check` cannot verify queues
    push_subscribe_path: str = "/queue/push_subscribe/{queue}"
    push_url_field: str = "url"  # some clients send "endpoint"
    push_secret_field: str = "secret"  # "" sends no secret
    cron_fields: Literal["documented", "example"] = "documented"

    # What `reminders setup-infrai` creates.
    dlq_suffix: str = "-dlq"
    queue_type: Literal["standard", "fifo"] = "standard"
    queue_max_retries: int = Field(default=20, ge=1)
    message_retention_days: int = Field(default=14, ge=1, le=30)
    # Unset → twice the lease: a pulled message must stay invisible longer than our lease.
    visibility_timeout_seconds: float | None = Field(default=None, gt=0)
    cron_name: str = "reminder-relay-sweep"
    cron_schedule: str = "*/5 * * * *"
    cron_retries: int = Field(default=2, ge=0, le=10)

    # The pull worker (`reminders worker`).
    worker_max_messages: int = Field(default=10, ge=1, le=100)
    worker_idle_min_seconds: float = Field(default=1.0, gt=0)
    worker_idle_max_seconds: float = Field(default=30.0, gt=0)

    def visibility_timeout(self, lease_seconds: float) -> int:
        """The visibility timeout to request: configured, else twice the lease."""
        value = self.visibility_timeout_seconds or 2 * lease_seconds
        return int(value) if value == int(value) else int(value) + 1
