"""The checks the settings run for the embedded queue kind at load time (its ``KIND``
names them lazily: the settings package loads the kinds while it loads itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.settings import Settings


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
