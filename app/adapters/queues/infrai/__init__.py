"""Infrai over plain HTTP: the publisher, the API client, the pull consumer, and the
``setup-infrai`` (``setup``) and ``reminders check`` (``check``, ``discovery``) tools."""

from .api import InfraiApi, InfraiConfig, InfraiError
from .consumer import InfraiConsumer, build_infrai_consumer
from .publisher import (
    PUBLISH_PATH,
    InfraiPublisher,
    build_http_client,
    build_infrai_publisher,
    infrai_config,
)

__all__ = [
    "PUBLISH_PATH",
    "InfraiApi",
    "InfraiConfig",
    "InfraiConsumer",
    "InfraiError",
    "InfraiPublisher",
    "build_http_client",
    "build_infrai_consumer",
    "build_infrai_publisher",
    "infrai_config",
]
