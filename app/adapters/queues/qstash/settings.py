"""QStash settings (prefix ``REMINDERS_QSTASH_``), nested in ``Settings.qstash``: the
publish token, the signing keys its pushes carry, the retries and the plan's delay
ceiling."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

QSTASH_URL = "https://qstash.upstash.io"


class QStashSettings(BaseSettings):
    """Publishing to QStash and checking its pushes (prefix ``REMINDERS_QSTASH_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_QSTASH_", extra="ignore")

    url: str = QSTASH_URL
    token: SecretStr = SecretStr("")
    current_signing_key: SecretStr = SecretStr("")
    next_signing_key: SecretStr = SecretStr("")
    retries: int = Field(default=3, ge=0, le=100)
    max_delay_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)  # the free plan's
    clock_leeway_seconds: float = Field(default=30.0, ge=0, le=600)

    def signing_keys(self) -> list[bytes]:
        """Current key first, then next (rotation); empty ones left out."""
        keys = (self.current_signing_key, self.next_signing_key)
        return [key.get_secret_value().encode() for key in keys if key.get_secret_value()]
