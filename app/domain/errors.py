"""The one error root of reminder-relay; the API maps these to HTTP in a single place."""

from __future__ import annotations

from .states import ErrorClass


class ReminderRelayError(Exception):
    """Base of every error this service raises on purpose."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or type(self).__name__).strip())


class NotFound(ReminderRelayError):
    """The resource does not exist."""


class Conflict(ReminderRelayError):
    """The request conflicts with the resource's current state."""


class InvalidInput(ReminderRelayError):
    """The request is well-formed but a field is not acceptable."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class LeaseLost(ReminderRelayError):
    """The send record was reclaimed by another worker; this worker's result is discarded."""


class LedgerUnavailable(ReminderRelayError):
    """The database connection failed during a ledger statement; it may or may not have
    taken effect."""


class Unauthenticated(ReminderRelayError):
    """Missing or invalid credentials."""


class TooManyFailedAttempts(ReminderRelayError):
    """Too many failed credential checks from this client (or everyone): wait and retry."""

    def __init__(self, retry_after: float) -> None:
        super().__init__("too many failed credential checks: retry later")
        self.retry_after = retry_after


class AuthenticationUnavailable(ReminderRelayError):
    """The keys to verify this request could not be fetched now; the sender should retry."""


class PayloadTooLarge(ReminderRelayError):
    """The request body exceeds the configured limit."""


class RequestTimedOut(ReminderRelayError):
    """The request body did not arrive completely in time."""


class MalformedDelivery(ReminderRelayError):
    """The delivery is authentic but its envelope or payload cannot be used."""


class MalformedEvent(ReminderRelayError):
    """An authentic provider event whose body cannot be read (not the documented shape)."""


class PublishError(ReminderRelayError):
    """The queue refused or failed to accept a message."""


class QueueUnavailable(ReminderRelayError):
    """The queue (broker or API) could not be reached; call again after a pause."""


class ConfigError(ReminderRelayError):
    """The service is misconfigured."""


class ProviderError(ReminderRelayError):
    """A channel provider failed; subclasses say how the failure is treated."""

    error_class: ErrorClass = ErrorClass.TRANSIENT

    def __init__(self, message: str | None = None, *, detail_class: str | None = None) -> None:
        super().__init__(message)
        # A finer label for operators (e.g. "smtp_4xx", "template_missing"); never a secret.
        self.detail_class = detail_class or self.error_class.value


class TransientProviderError(ProviderError):
    """Timeout, connection error or 5xx: worth retrying later."""

    error_class = ErrorClass.TRANSIENT


class RateLimitedError(ProviderError):
    """The provider throttled us: retry no sooner than retry_after seconds."""

    error_class = ErrorClass.RATE_LIMITED

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: float | None = None,
        detail_class: str | None = None,
    ) -> None:
        super().__init__(message, detail_class=detail_class)
        self.retry_after = retry_after


class PermanentProviderError(ProviderError):
    """The provider will never accept this message (bad address, rejected, bad template)."""

    error_class = ErrorClass.PERMANENT


class WebhookGone(PermanentProviderError):
    """The webhook endpoint answered 410 Gone: the customer's webhook channel is disabled."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, detail_class="webhook_gone")
