"""Google Cloud Tasks and Pub/Sub settings, nested in ``Settings``.

``REMINDERS_CLOUDTASKS_*`` and ``REMINDERS_PUBSUB_*`` say where the queues live and what
``reminders setup`` writes; ``REMINDERS_GOOGLE_PUSH_*`` say how Google proves itself on each
push (OIDC: the service account that signs tokens and the audience they name). Without a
push service account, pushes are checked with the push secrets instead: Cloud Tasks carry
our ``sha256=`` HMAC header, Pub/Sub push endpoints a ``?token=`` parameter.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
GOOGLE_KINDS = ("cloudtasks", "pubsub")  # the queue kinds of the [gcp] extra


class GooglePushSettings(BaseSettings):
    """OIDC on Google's pushes (prefix ``REMINDERS_GOOGLE_PUSH_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_GOOGLE_PUSH_", extra="ignore")

    # Empty: no OIDC; the push secrets authenticate Google's pushes instead.
    service_account: str = ""
    # Empty: ``{REMINDERS_PUBLIC_BASE_URL}/push``. Tasks and subscriptions are created with it.
    audience: str = ""
    certs_url: str = GOOGLE_CERTS_URL
    clock_skew_seconds: float = Field(default=60.0, ge=0, le=600)

    def audience_for(self, public_base_url: str) -> str:
        """The audience tokens must name."""
        return self.audience or f"{public_base_url.rstrip('/')}/push"


class CloudTasksSettings(BaseSettings):
    """Where Cloud Tasks queues live and their retry configuration (``REMINDERS_CLOUDTASKS_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_CLOUDTASKS_", extra="ignore")

    project: str = ""
    location: str = ""
    # What `reminders setup --queue cloudtasks` writes on each queue.
    max_attempts: int = Field(default=100, ge=-1)
    min_backoff_seconds: int = Field(default=10, ge=1)
    max_backoff_seconds: int = Field(default=3600, ge=1)
    max_doublings: int = Field(default=16, ge=0)


class PubSubSettings(BaseSettings):
    """Where Pub/Sub topics live and the subscriptions setup writes (``REMINDERS_PUBSUB_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_PUBSUB_", extra="ignore")

    project: str = ""
    # What `reminders setup --queue pubsub` writes on each push subscription.
    ack_deadline_seconds: int = Field(default=60, ge=10, le=600)
    min_backoff_seconds: int = Field(default=10, ge=0, le=600)  # 0: no retry policy
    max_backoff_seconds: int = Field(default=600, ge=0, le=600)
    max_delivery_attempts: int = Field(default=100, ge=5, le=100)
    dead_letter_suffix: str = "-dead"
    subscription_suffix: str = "-push"


def check_google_settings(
    kinds: set[str],
    *,
    cloudtasks: CloudTasksSettings,
    pubsub: PubSubSettings,
    max_attempts: int,
    provider_timeout_seconds: float,
) -> None:
    """Refuse Google settings that cannot work or would let a queue give up before us."""
    if "cloudtasks" in kinds:
        if not cloudtasks.project or not cloudtasks.location:
            raise ValueError(
                "REMINDERS_CLOUDTASKS_PROJECT and REMINDERS_CLOUDTASKS_LOCATION are required "
                "for the cloudtasks queue"
            )
        if 0 <= cloudtasks.max_attempts <= max_attempts:
            raise ValueError(
                "REMINDERS_CLOUDTASKS_MAX_ATTEMPTS must exceed REMINDERS_MAX_ATTEMPTS (or be "
                "-1, unlimited): Cloud Tasks deletes a task after its last attempt"
            )
    if "pubsub" in kinds:
        if not pubsub.project:
            raise ValueError("REMINDERS_PUBSUB_PROJECT is required for the pubsub queue")
        if pubsub.max_delivery_attempts <= max_attempts:
            raise ValueError(
                "REMINDERS_PUBSUB_MAX_DELIVERY_ATTEMPTS must exceed REMINDERS_MAX_ATTEMPTS: "
                "our busy answers count as Pub/Sub delivery attempts"
            )
        if pubsub.ack_deadline_seconds <= provider_timeout_seconds:
            raise ValueError(
                "REMINDERS_PUBSUB_ACK_DEADLINE_SECONDS must exceed "
                "REMINDERS_PROVIDER_TIMEOUT_SECONDS, or Pub/Sub redelivers during a send"
            )
