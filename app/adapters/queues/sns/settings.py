"""SNS settings (prefix ``REMINDERS_SNS_``), nested in ``Settings.sns``: the topic of each
queue (``queue=arn`` pairs), the region and an endpoint override, and how SNS pushes are
verified."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


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
