"""The provider event sources the settings configure: a provider's route is open only when
its credential is set. SendGrid and SES need the ``[aws]`` extra (``cryptography``), imported
here only when they are configured."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import SecretStr

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ConfigError
from app.domain.ports import EmailEventSource
from app.settings import Settings

from .postmark import PostmarkEvents

_EXTRA = "{name} needs: pip install 'reminder-relay[aws]' (cryptography)"


def build_event_sources(settings: Settings, http: SharedHttp) -> dict[str, EmailEventSource]:
    """Each configured provider's source, by the name its route carries."""
    postmark_user, postmark_password = (
        settings.postmark_webhook_user,
        settings.postmark_webhook_password,
    )
    builders: dict[str, tuple[bool, Callable[[], EmailEventSource]]] = {
        "resend": (_set(settings.resend_webhook_secret), lambda: _resend(settings)),
        "sendgrid": (_set(settings.sendgrid_webhook_public_key), lambda: _sendgrid(settings)),
        "postmark": (
            bool(postmark_user) and _set(postmark_password),
            lambda: PostmarkEvents(postmark_user, postmark_password),
        ),
        "ses": (bool(settings.ses_events_topic_arns), lambda: _ses(settings, http)),
    }
    return {name: build() for name, (configured, build) in builders.items() if configured}


def _set(secret: SecretStr) -> bool:
    return bool(secret.get_secret_value())


def _resend(settings: Settings) -> EmailEventSource:
    from .resend import ResendEvents

    try:
        return ResendEvents(settings.resend_webhook_secret)
    except Exception:  # the library rejects a malformed secret; never echo it
        raise ConfigError(
            "REMINDERS_RESEND_WEBHOOK_SECRET is not a Standard Webhooks secret (whsec_…)"
        ) from None


def _sendgrid(settings: Settings) -> EmailEventSource:
    try:
        from .sendgrid import SendGridEvents

        return SendGridEvents(settings.sendgrid_webhook_public_key)
    except ImportError as error:
        raise ConfigError(_EXTRA.format(name="REMINDERS_SENDGRID_WEBHOOK_PUBLIC_KEY")) from error


def _ses(settings: Settings, http: SharedHttp) -> EmailEventSource:
    try:
        from app.adapters.queues.sns.push_format import (
            SNS_HOST_PATTERN,
            CertificateStore,
            SnsPushFormat,
        )
    except ImportError as error:
        raise ConfigError(_EXTRA.format(name="REMINDERS_SES_EVENTS_TOPIC_ARNS")) from error
    from .ses import SesEvents

    sns = settings.sns
    certificates = CertificateStore(http, host_pattern=sns.cert_host_pattern or SNS_HOST_PATTERN)
    verifier = SnsPushFormat(
        settings.ses_events_topic_arns, certificates, http,
        tolerance_seconds=sns.timestamp_tolerance_seconds,
    )  # fmt: skip
    return SesEvents(verifier)
