"""AWS SNS and Upstash QStash settings, nested in ``Settings``.

``REMINDERS_SNS_*``: the topic of each queue (``queue=arn`` pairs), the region and an
endpoint override, and how SNS pushes are verified. ``REMINDERS_QSTASH_*``: the publish
token, the signing keys its pushes carry, the retries and the plan's delay ceiling.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

QSTASH_URL = "https://qstash.upstash.io"


class SnsSettings(BaseSettings):
    """SNS topics per queue and push verification (prefix ``REMINDERS_SNS_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_SNS_", extra="ignore")

    # "reminders=arn:aws:sns:eu-west-1:123456789012:reminders,reminders-webhook=arn:…"
    topic_arns: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    region: str = ""  # empty: the region of the first topic ARN
    endpoint_url: str = ""  # empty: AWS's (or botocore's AWS_ENDPOINT_URL_SNS)
    # Certificates and SubscribeURLs are fetched only from hosts matching this regular
    # expression; empty: SNS's own hosts, sns.<region>.amazonaws.com(.cn).
    cert_host_pattern: str = ""
    # SNS redelivers the original signed message for as long as its delivery policy retries,
    # at most 3,600 s for HTTP/S (an AWS hard limit); plus margin.
    timestamp_tolerance_seconds: float = Field(default=3900.0, ge=60)

    @field_validator("topic_arns", mode="before")
    @classmethod
    def _parse_topics(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs = [part.strip() for part in value.split(",") if part.strip()]
        topics = {}
        for pair in pairs:
            queue, sep, arn = pair.partition("=")
            if not sep or not arn.strip().startswith("arn:"):
                raise ValueError(f"REMINDERS_SNS_TOPIC_ARNS: {pair!r} is not queue=arn:aws:sns:…")
            topics[queue.strip()] = arn.strip()
        return topics

    def region_name(self) -> str:
        """The configured region, else the one in the first topic ARN."""
        if self.region:
            return self.region
        first = next(iter(self.topic_arns.values()), "")
        parts = first.split(":")
        return parts[3] if len(parts) > 3 else ""


class QStashSettings(BaseSettings):
    """Publishing to QStash and checking its pushes (prefix ``REMINDERS_QSTASH_``)."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_QSTASH_", extra="ignore")

    url: str = QSTASH_URL
    token: SecretStr = SecretStr("")
    current_signing_key: SecretStr = SecretStr("")
    next_signing_key: SecretStr = SecretStr("")
    retries: int = Field(default=3, ge=0, le=100)
    max_delay_seconds: float = Field(default=7 * 24 * 3600.0, gt=0)  # the free plan's
    clock_leeway_seconds: float = Field(default=30.0, ge=0, le=600)

    def signing_keys(self) -> list[bytes]:
        """Current key first, then next (rotation); empty ones left out."""
        keys = (self.current_signing_key, self.next_signing_key)
        return [key.get_secret_value().encode() for key in keys if key.get_secret_value()]


def check_aws_settings(
    kinds: set[str], *, sns_queues: set[str], sns: SnsSettings, qstash: QStashSettings
) -> None:
    """Refuse to start when a queue kind in use lacks what it needs."""
    if "sns" in kinds:
        missing = sorted(queue for queue in sns_queues if queue not in sns.topic_arns)
        if missing:
            raise ValueError(f"REMINDERS_SNS_TOPIC_ARNS has no topic for queue(s) {missing}")
        if not sns.region_name():
            raise ValueError("REMINDERS_SNS_REGION is empty and the topic ARNs name none")
    if "qstash" in kinds:
        if not qstash.token.get_secret_value():
            raise ValueError("REMINDERS_QSTASH_TOKEN is required with the qstash queue")
        if not qstash.signing_keys():
            raise ValueError("REMINDERS_QSTASH_CURRENT_SIGNING_KEY is required")
