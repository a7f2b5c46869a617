"""Configuration from the environment (prefix ``REMINDERS_``), built once and passed in."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.domain.retry import BackoffPolicy

# Values that mean "somebody forgot to set this"; refused outside dev mode.
PLACEHOLDER_SECRETS = frozenset(
    {"", "changethis", "changeme", "change-me", "secret", "password", "placeholder", "xxx", "todo"}
)
SECRET_FIELDS = ("cron_token", "api_token", "admin_token")
DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///./reminders.db"


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

    queue: Literal["memory", "embedded"] = "memory"
    queue_name: str = "reminders"
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

    @field_validator("push_secrets", mode="before")
    @classmethod
    def _parse_push_secrets(cls, value: object) -> object:
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
        return self

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
