"""Deliverability settings (docs/deliverability.md): the provider event webhooks' credentials,
the soft-bounce rule and failover's circuit breaker, a base of ``Settings``."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.domain.failover import BreakerPolicy
from app.settings.channels import split_csv


class DeliverabilitySettings(BaseSettings):
    """Which provider event routes are open, with what credential; when soft bounces count."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    # POST /events/email/<provider> answers 404 until its credential is set.
    resend_webhook_secret: SecretStr = SecretStr("")  # whsec_… from Resend's webhook page
    sendgrid_webhook_public_key: SecretStr = SecretStr("")  # base64 DER, as SendGrid shows it
    postmark_webhook_user: str = ""
    postmark_webhook_password: SecretStr = SecretStr("")
    ses_events_topic_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Soft bounces suppress an address once this many arrive within the window (0: never).
    soft_bounce_limit: int = Field(default=3, ge=0)
    soft_bounce_window_seconds: float = Field(default=7 * 86400.0, gt=0)
    # Failover's circuit breaker, one per provider and process: it opens after this many
    # transient failures in a row, or when at least circuit_min_calls calls in the window
    # failed at circuit_error_rate or more, and lets one probe through after the cooldown.
    circuit_failures: int = Field(default=5, ge=1)
    circuit_error_rate: float = Field(default=0.5, gt=0, le=1)
    circuit_min_calls: int = Field(default=20, ge=1)
    circuit_window_seconds: float = Field(default=60.0, gt=0)
    circuit_cooldown_seconds: float = Field(default=30.0, gt=0)

    @field_validator("ses_events_topic_arns", mode="before")
    @classmethod
    def _parse_topic_arns(cls, value: object) -> object:
        return split_csv(value)

    @property
    def breaker_policy(self) -> BreakerPolicy:
        """The REMINDERS_CIRCUIT_* settings as the circuit breaker's policy."""
        return BreakerPolicy(
            failures=self.circuit_failures,
            error_rate=self.circuit_error_rate,
            min_calls=self.circuit_min_calls,
            window=timedelta(seconds=self.circuit_window_seconds),
            cooldown=timedelta(seconds=self.circuit_cooldown_seconds),
        )

    @property
    def soft_bounce_window(self) -> timedelta:
        """REMINDERS_SOFT_BOUNCE_WINDOW_SECONDS as a duration."""
        return timedelta(seconds=self.soft_bounce_window_seconds)
