"""Embedded queue settings (prefix ``REMINDERS_EMBEDDED_``), nested in ``Settings.embedded``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.domain.retry import BackoffPolicy

if TYPE_CHECKING:
    from app.settings import Settings


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
    concurrency: int = Field(default=16, ge=1, le=1024)
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


def check_embedded_retries(settings: Settings) -> None:
    """The queue must keep redelivering until our own ledger gives up (and records a dead
    letter); busy answers count as queue retries too."""
    in_use = "embedded" in settings.queue_kinds_in_use
    if in_use and settings.embedded.max_retries <= settings.max_attempts:
        raise ValueError(
            "REMINDERS_EMBEDDED_MAX_RETRIES must be above REMINDERS_MAX_ATTEMPTS "
            "so the queue never drops a message our ledger would still retry"
        )


def check_embedded_push_timeout(settings: Settings) -> None:
    """A push given up sooner than a delivery's bound is redelivered while it may still be
    finalizing."""
    configured, bound = settings.embedded.push_timeout_seconds, settings.delivery_seconds
    if configured is not None and configured <= bound:
        raise ValueError(
            "REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS must exceed "
            "REMINDERS_PROVIDER_TIMEOUT_SECONDS + REMINDERS_LEASE_SECONDS (the finalize's "
            f"budget), {bound:g} s: a push given up sooner is redelivered "
            "while its send may still be finalizing"
        )


def check_embedded_visibility(settings: Settings) -> None:
    """A pushed message stays hidden longer than its push may take."""
    configured = settings.embedded.visibility_timeout_seconds
    if configured is not None and configured <= settings.embedded_push_timeout:
        raise ValueError(
            "REMINDERS_EMBEDDED_VISIBILITY_TIMEOUT_SECONDS must exceed the push timeout, "
            f"{settings.embedded_push_timeout:g} s, or a slow push is redelivered while it is "
            "still running"
        )
