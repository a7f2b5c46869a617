"""Channel provider settings (README "Channel providers"), a base of ``Settings``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.settings.problems import MissingSecrets
from app.settings.secrets import DEV_CHANNEL_SECRETS, is_placeholder

# Every provider of each channel (app/adapters/channels/registry.py builds them by name).
EmailProviderName = Literal["outbox", "smtp", "email_api", "postmark", "sendgrid", "ses"]
WebhookProviderName = Literal["outbox", "webhook"]


def split_csv(value: object) -> object:
    """A comma-separated environment value as a list (lists pass through)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class ChannelSettings(BaseSettings):
    """Which provider sends each channel, and what those providers need."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    email_provider: EmailProviderName = "outbox"
    # Failover (docs/deliverability.md): providers of the email channel in order of
    # preference; when set, it replaces REMINDERS_EMAIL_PROVIDER.
    email_providers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    webhook_provider: WebhookProviderName = "outbox"
    outbox_dir: Path = Path("./outbox")
    outbox_fsync: bool = True
    templates_dir: Path | None = None

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
    postmark_api_url: str = "https://api.postmarkapp.com"
    postmark_server_token: SecretStr = SecretStr("")
    postmark_message_stream: str = "outbound"
    sendgrid_api_url: str = "https://api.sendgrid.com"
    sendgrid_api_key: SecretStr = SecretStr("")
    # SES v2 SendEmail (region: REMINDERS_SNS_REGION or the AWS environment).
    ses_configuration_set: str = ""
    ses_endpoint_url: str = ""
    webhook_signing_secret: SecretStr = SecretStr("")
    webhook_allowed_targets: Annotated[list[str], NoDecode] = Field(default_factory=list)
    http_max_connections: int = Field(default=100, ge=1)

    @field_validator("webhook_allowed_targets", "email_providers", mode="before")
    @classmethod
    def _parse_allowed_targets(cls, value: object) -> object:
        return split_csv(value)

    @property
    def email_chain(self) -> tuple[str, ...]:
        """The email providers in order: REMINDERS_EMAIL_PROVIDERS, else the one of
        REMINDERS_EMAIL_PROVIDER."""
        return tuple(self.email_providers) or (self.email_provider,)

    def check_channels(self, *, dev_mode: bool) -> None:
        """Dev mode fills the channel secrets; otherwise each real provider needs its own."""
        if dev_mode:
            for name, value in DEV_CHANNEL_SECRETS.items():
                if not getattr(self, name).get_secret_value():
                    object.__setattr__(self, name, SecretStr(value))
        email = set(self.email_chain)
        if len(email) < len(self.email_chain):
            raise ValueError(
                f"REMINDERS_EMAIL_PROVIDERS names a provider twice: {','.join(self.email_chain)}"
            )
        required = {
            "unsubscribe_secret": bool(email - {"outbox"}),
            "email_api_key": "email_api" in email,
            "postmark_server_token": "postmark" in email,
            "sendgrid_api_key": "sendgrid" in email,
            "webhook_signing_secret": self.webhook_provider == "webhook",
        }
        missing = [
            f"REMINDERS_{name.upper()}"
            for name, needed in required.items()
            if needed and is_placeholder(getattr(self, name))
        ]
        if missing:
            raise MissingSecrets(missing)

    @property
    def channel_providers(self) -> dict[str, str]:
        """The provider of each channel, by name (the email failover chain comma-separated)."""
        return {"email": ",".join(self.email_chain), "webhook": self.webhook_provider}
