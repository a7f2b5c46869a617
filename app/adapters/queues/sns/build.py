"""The AWS SNS queue kind built from the settings.

The SNS modules need the ``[aws]`` extra (cryptography, aiobotocore): they are imported
only when an SNS queue is configured, so the default install starts without them.
"""

from __future__ import annotations

from app.domain.errors import ConfigError
from app.domain.ports import PushFormat, QueuePublisher
from app.settings.core import EXTRAS

from ..parts import QueueParts
from . import KIND

_AWS_EXTRA = EXTRAS[str(KIND.extra)].hint("an SNS queue")


def build_sns_publisher(parts: QueueParts) -> QueuePublisher:
    """Publishes to the topic configured for each message's queue."""
    from .publisher import SnsPublisher  # aiobotocore itself is imported on first publish

    sns = parts.settings.sns
    return SnsPublisher(
        sns.topic_arns, region=sns.region_name(), endpoint_url=sns.endpoint_url or None
    )


def build_sns_push_format(parts: QueueParts) -> PushFormat:
    """Signature checks with certificates from SNS hosts only, cached in the process."""
    try:
        from .push_format import (
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
