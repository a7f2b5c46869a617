"""Which provider serves each channel, from settings."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import get_args

from app.domain.errors import ConfigError
from app.domain.ports import ChannelProvider
from app.settings import Settings
from app.settings.channels import EmailProviderName, WebhookProviderName

from .email_api import EmailApiProvider
from .http import SharedHttp
from .outbox import OutboxProvider
from .postmark import PostmarkProvider
from .sendgrid import SendGridProvider
from .ses import SesProvider
from .smtp import SmtpProvider
from .ssrf import TargetPolicy
from .webhook import WebhookProvider

# Which providers can serve which channel: the names the settings accept.
PROVIDERS_BY_CHANNEL = {
    "email": get_args(EmailProviderName),
    "webhook": get_args(WebhookProviderName),
}


def build_providers(
    settings: Settings, *, http: SharedHttp | None = None
) -> dict[str, ChannelProvider]:
    """One provider per channel, as ``REMINDERS_EMAIL_PROVIDER`` etc. name them (the first
    of ``REMINDERS_EMAIL_PROVIDERS`` when that is set)."""
    return {channel: chain[0] for channel, chain in build_chains(settings, http=http).items()}


def build_chains(
    settings: Settings, *, http: SharedHttp | None = None
) -> dict[str, tuple[ChannelProvider, ...]]:
    """The providers of each channel in order of preference (two or more: failover); one
    object per provider name, shared by the channels that name it."""
    shared_http = http or SharedHttp(max_connections=settings.http_max_connections)
    factories: Mapping[str, Callable[[], ChannelProvider]] = {
        "outbox": lambda: OutboxProvider(
            settings.outbox_dir, fsync=settings.outbox_fsync, sender=settings.email_from
        ),
        "smtp": lambda: _smtp(settings),
        "email_api": lambda: EmailApiProvider(
            shared_http,
            base_url=settings.email_api_url,
            api_key=settings.email_api_key,
            sender=settings.email_from,
        ),
        "postmark": lambda: PostmarkProvider(
            shared_http,
            server_token=settings.postmark_server_token,
            sender=settings.email_from,
            base_url=settings.postmark_api_url,
            message_stream=settings.postmark_message_stream,
        ),
        "sendgrid": lambda: SendGridProvider(
            shared_http,
            api_key=settings.sendgrid_api_key,
            sender=settings.email_from,
            base_url=settings.sendgrid_api_url,
        ),
        "ses": lambda: SesProvider(
            sender=settings.email_from,
            region=settings.sns.region_name() or None,
            endpoint_url=settings.ses_endpoint_url or None,
            configuration_set=settings.ses_configuration_set,
        ),
        "webhook": lambda: _webhook(settings, shared_http),
    }
    built: dict[str, ChannelProvider] = {}
    chains: dict[str, tuple[ChannelProvider, ...]] = {}
    for channel, names in (
        ("email", settings.email_chain),
        ("webhook", (settings.webhook_provider,)),
    ):
        for name in names:
            if name not in PROVIDERS_BY_CHANNEL[channel]:
                variable = "PROVIDERS" if len(names) > 1 else "PROVIDER"
                raise ConfigError(
                    f"REMINDERS_{channel.upper()}_{variable}: {name!r} is not a provider of "
                    f"{channel} ({', '.join(PROVIDERS_BY_CHANNEL[channel])})"
                )
            if name not in built:
                built[name] = factories[name]()
        chains[channel] = tuple(built[name] for name in names)
    return chains


def _smtp(settings: Settings) -> SmtpProvider:
    # Built once: left to aiosmtplib, a default context is created on every connection.
    cafile = str(settings.smtp_ca_file) if settings.smtp_ca_file is not None else None
    tls_context = ssl.create_default_context(cafile=cafile)
    return SmtpProvider(
        host=settings.smtp_host,
        port=settings.smtp_port,
        sender=settings.email_from,
        security=settings.smtp_security,
        username=settings.smtp_username,
        password=settings.smtp_password,
        tls_context=tls_context,
    )


def _webhook(settings: Settings, http: SharedHttp) -> WebhookProvider:
    try:
        return WebhookProvider(
            http,
            signing_secret=settings.webhook_signing_secret,
            policy=TargetPolicy.from_entries(settings.webhook_allowed_targets),
        )
    except Exception as error:  # the library rejects a malformed secret; never echo it
        raise ConfigError(
            f"REMINDERS_WEBHOOK_SIGNING_SECRET is not a valid Standard Webhooks secret "
            f"({type(error).__name__})"
        ) from None
