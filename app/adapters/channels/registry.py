"""Which provider serves each channel, from settings."""

from __future__ import annotations

from collections.abc import Mapping

from app.domain.errors import ConfigError
from app.domain.ports import ChannelProvider
from app.settings import Settings

from .outbox import OutboxProvider

CHANNELS = ("email", "webhook")


def build_providers(settings: Settings) -> dict[str, ChannelProvider]:
    """One provider per channel, as ``REMINDERS_EMAIL_PROVIDER`` etc. name them."""
    outbox = OutboxProvider(settings.outbox_dir, fsync=settings.outbox_fsync)
    available: Mapping[str, ChannelProvider] = {"outbox": outbox}
    providers: dict[str, ChannelProvider] = {}
    for channel, name in (
        ("email", settings.email_provider),
        ("webhook", settings.webhook_provider),
    ):
        if name not in available:
            raise ConfigError(f"REMINDERS_{channel.upper()}_PROVIDER={name!r} is not a provider")
        providers[channel] = available[name]
    return providers
