"""RabbitMQ settings (prefix ``REMINDERS_RABBITMQ_``), nested in ``Settings.rabbitmq``."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class RabbitMQSettings(BaseSettings):
    """Where the broker is and how the queues are declared (``reminders setup``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_RABBITMQ_", extra="ignore")

    # amqp://user:password@host:5672/vhost (amqps:// for TLS); a secret: it holds a password.
    url: SecretStr = SecretStr("amqp://guest:guest@127.0.0.1:5672/")
    # The broker dead-letters a message redelivered this often without an ack (a worker
    # crashing on it each time); our own retries are new messages and do not count.
    delivery_limit: int = Field(default=10, ge=1, le=1000)
    # The sweep horizon: messages wait in per-delay-bucket TTL queues up to this long.
    max_delay_seconds: int = Field(default=3600, ge=1, le=86400)
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
