"""The AWS SNS and Upstash QStash queue kinds built from the settings.

The SNS modules need the ``[aws]`` extra (cryptography, aiobotocore): they are imported
only when an SNS queue is configured, so the default install starts without them.
"""

from __future__ import annotations

from app.adapters.push_formats.qstash import QStashPushFormat
from app.domain.clock import utc_now
from app.domain.errors import ConfigError
from app.domain.ports import PushFormat, QueuePublisher
from app.settings.extras import AWS

from .parts import QueueParts
from .qstash import QStashPublisher

_AWS_EXTRA = AWS.hint("an SNS queue")


def build_sns_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to the topic configured for each message's queue."""
    from .sns import SnsPublisher  # aiobotocore itself is imported on first publish

    sns = parts.settings.sns
    return SnsPublisher(
        sns.topic_arns, region=sns.region_name(), endpoint_url=sns.endpoint_url or None
    )


def build_sns_push_format(parts: QueueParts) -> PushFormat:
    """Signature checks with certificates from SNS hosts only, cached in the process."""
    try:
        from app.adapters.push_formats.sns import (
            SNS_HOST_PATTERN,
            CertificateStore,
            SnsPushFormat,
        )
    except ImportError as error:  # cryptography
        raise ConfigError(_AWS_EXTRA) from error
    sns = parts.settings.sns
    http = parts.shared_http()
    pattern = sns.cert_host_pattern or SNS_HOST_PATTERN
    return SnsPushFormat(
        sns.topic_arns.values(),
        CertificateStore(http, host_pattern=pattern),
        http,
        tolerance_seconds=sns.timestamp_tolerance_seconds,
    )


def build_qstash_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to QStash, addressed to our own push route of each queue."""
    settings = parts.settings
    qstash = settings.qstash
    return QStashPublisher(
        parts.shared_http(),
        base_url=qstash.url,
        token=qstash.token,
        push_url_for=settings.push_url,
        retries=qstash.retries,
        max_delay_seconds=qstash.max_delay_seconds,
        clock=parts.clock or utc_now,
    )


def build_qstash_push_format_for(parts: QueueParts, queue: str) -> PushFormat:
    """The JWT check of one queue: ``sub`` must be that queue's configured push URL."""
    qstash = parts.settings.qstash
    return QStashPushFormat(
        qstash.signing_keys(),
        push_url=parts.settings.push_url(queue),
        leeway_seconds=qstash.clock_leeway_seconds,
    )
