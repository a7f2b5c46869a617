"""Configuration from the environment (prefix ``REMINDERS_``), built once and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.domain.retry import BackoffPolicy
from app.settings_embedded import EmbeddedQueueSettings
from app.settings_infrai import InfraiSettings, check_infrai_settings

# Values that mean "somebody forgot to set this"; refused outside dev mode.
PLACEHOLDER_SECRETS = frozenset(
    {"", "changethis", "changeme", "change-me", "secret", "password", "placeholder", "xxx", "todo"}
)
SECRET_FIELDS = ("cron_token", "api_token", "admin_token")
DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///./reminders.db"
# Well-known dev-mode values; a Standard Webhooks secret is base64 after "whsec_".
DEV_CHANNEL_SECRETS = {
    "unsubscribe_secret": "dev-unsubscribe-secret",
    "webhook_signing_secret": "whsec_ZGV2LXdlYmhvb2stc2lnbmluZy1zZWNyZXQ=",
}


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Every knob of the service; see the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    dev_mode: bool = False
    database_url: str = DEFAULT_SQLITE_URL
    database_pool_size: int = Field(default=16, ge=1)

    queue: Literal["memory", "embedded", "infrai"] = "embedded"
    # The embedded queue's dispatcher: REMINDERS_EMBEDDED_* (app/settings_embedded.py).
    embedded: EmbeddedQueueSettings = Field(default_factory=EmbeddedQueueSettings)
    queue_name: str = "reminders"
    # One queue per channel (explicit fan-out); empty → REMINDERS_QUEUE_NAME.
    email_queue: str = ""
    webhook_queue: str = ""
    infrai: InfraiSettings = Field(default_factory=InfraiSettings)  # REMINDERS_INFRAI_*
    public_base_url: str = "http://127.0.0.1:8000"

    push_secrets: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    push_signature_header: str = "X-Infrai-Signature"
    push_timestamp_header: str = "X-Infrai-Timestamp"
    push_timestamp_tolerance_seconds: int = Field(default=300, ge=1)
    push_max_body_bytes: int = Field(default=256 * 1024 + 16 * 1024, ge=1024)

    cron_token: SecretStr = SecretStr("")
    api_token: SecretStr = SecretStr("")
    admin_token: SecretStr = SecretStr("")

    lease_seconds: float = Field(default=60.0, gt=0)
    provider_timeout_seconds: float = Field(default=20.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_seconds: float = Field(default=10.0, gt=0)
    backoff_cap_seconds: float = Field(default=3600.0, gt=0)
    usefulness_grace_seconds: float = Field(default=86400.0, ge=0)

    sweep_batch_size: int = Field(default=500, ge=1, le=10000)
    sweep_time_budget_seconds: float = Field(default=60.0, gt=0, le=840)
    sweep_claim_seconds: float = Field(default=120.0, gt=0)

    email_provider: str = "outbox"
    webhook_provider: str = "outbox"
    outbox_dir: Path = Path("./outbox")
    outbox_fsync: bool = True
    templates_dir: Path | None = None

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    readyz_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    admin_session_seconds: float = Field(default=8 * 3600, gt=0)
    # Optional bearer token of GET /metrics (empty: open; restrict it at the network then).
    metrics_token: SecretStr = SecretStr("")

    # Channel providers (README "Channel providers"); secrets checked in _check_channels.
    email_from: str = "reminders@localhost"
    unsubscribe_secret: SecretStr = SecretStr("")
    smtp_host: str = "localhost"
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    smtp_username: str | None = None
    smtp_password: SecretStr = SecretStr("")
    smtp_ca_file: Path | None = None
    email_api_url: str = "https://api.resend.com"
    email_api_key: SecretStr = SecretStr("")
    webhook_signing_secret: SecretStr = SecretStr("")
    webhook_allowed_targets: Annotated[list[str], NoDecode] = Field(default_factory=list)
    http_max_connections: int = Field(default=100, ge=1)

    @field_validator("push_secrets", mode="before")
    @classmethod
    def _parse_push_secrets(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("webhook_allowed_targets", mode="before")
    @classmethod
    def _parse_allowed_targets(cls, value: object) -> object:
        return _split_csv(value)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.provider_timeout_seconds >= self.lease_seconds:
            raise ValueError(
                "REMINDERS_PROVIDER_TIMEOUT_SECONDS must be below REMINDERS_LEASE_SECONDS "
                "so a lease never expires while its worker is still waiting on a provider"
            )
        if self.dev_mode:
            self._fill_dev_secrets()
        else:
            self._refuse_placeholder_secrets()
        check_infrai_settings(
            self.infrai,
            queue=self.queue,
            lease_seconds=self.lease_seconds,
            max_attempts=self.max_attempts,
            dev_mode=self.dev_mode,
        )
        self._check_channels()
        if self.queue == "embedded" and self.embedded.max_retries <= self.max_attempts:
            # The queue must keep redelivering until our own ledger gives up (and records a
            # dead letter); busy answers count as queue retries too.
            raise ValueError(
                "REMINDERS_EMBEDDED_MAX_RETRIES must be above REMINDERS_MAX_ATTEMPTS "
                "so the queue never drops a message our ledger would still retry"
            )
        return self

    def _check_channels(self) -> None:
        # Dev mode fills the channel secrets; otherwise each real provider needs its own.
        if self.dev_mode:
            for name in ("unsubscribe_secret", "webhook_signing_secret"):
                if not getattr(self, name).get_secret_value():
                    object.__setattr__(self, name, SecretStr(DEV_CHANNEL_SECRETS[name]))
        required = {
            "unsubscribe_secret": self.email_provider in ("smtp", "email_api"),
            "email_api_key": self.email_provider == "email_api",
            "webhook_signing_secret": self.webhook_provider == "webhook",
        }
        for name, needed in required.items():
            value = getattr(self, name).get_secret_value().strip().lower()
            if needed and value in PLACEHOLDER_SECRETS:
                raise ValueError(f"REMINDERS_{name.upper()} is empty or a placeholder")

    def _refuse_placeholder_secrets(self) -> None:
        for name in SECRET_FIELDS:
            if getattr(self, name).get_secret_value().strip().lower() in PLACEHOLDER_SECRETS:
                raise ValueError(f"REMINDERS_{name.upper()} is empty or a placeholder")
        if not self.push_secrets or any(
            s.get_secret_value().strip().lower() in PLACEHOLDER_SECRETS for s in self.push_secrets
        ):
            raise ValueError("REMINDERS_PUSH_SECRETS is empty or holds a placeholder")

    def _fill_dev_secrets(self) -> None:
        # Dev mode only: well-known values so the one-command run works without setup.
        for name in SECRET_FIELDS:
            if not getattr(self, name).get_secret_value():
                object.__setattr__(self, name, SecretStr(f"dev-{name.replace('_', '-')}"))
        if not self.push_secrets:
            object.__setattr__(self, "push_secrets", [SecretStr("dev-push-secret")])

    @property
    def backoff(self) -> BackoffPolicy:
        """The retry policy these settings describe."""
        return BackoffPolicy(self.backoff_base_seconds, self.backoff_cap_seconds)

    @property
    def is_sqlite(self) -> bool:
        """True when the database is SQLite (writes are then serialized on one connection)."""
        return self.database_url.startswith("sqlite")

    @property
    def channel_queues(self) -> dict[str, str]:
        """The queue each channel publishes to (one queue per channel when configured)."""
        return {
            "email": self.email_queue or self.queue_name,
            "webhook": self.webhook_queue or self.queue_name,
        }

    def queue_for_channel(self, channel: str) -> str:
        """The queue a channel's messages go to; unknown channels use REMINDERS_QUEUE_NAME."""
        return self.channel_queues.get(channel, self.queue_name)
