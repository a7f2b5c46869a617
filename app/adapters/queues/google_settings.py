"""How Google proves itself on each push (``REMINDERS_GOOGLE_PUSH_*``), shared by the two
Google queue kinds (``cloudtasks``, ``pubsub``): OIDC, with the service account that signs
tokens and the audience they name. Without a push service account, pushes are checked with
the push secrets instead: Cloud Tasks carry our ``sha256=`` HMAC header, Pub/Sub push
endpoints a ``?token=`` parameter.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"


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
