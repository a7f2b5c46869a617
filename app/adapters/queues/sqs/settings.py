"""Amazon SQS settings (prefix ``REMINDERS_SQS_``), nested in ``Settings.sqs``.

Credentials and region come from the standard AWS variables and chain (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, a profile, an instance
role) unless given here.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class SqsSettings(BaseSettings):
    """Where the SQS queues are and how often SQS redelivers before its DLQ."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_SQS_", extra="ignore")

    # "reminders=https://sqs.eu-west-1.amazonaws.com/123456789012/reminders,…"; a channel
    # queue not listed is looked up by its name (GetQueueUrl).
    queue_urls: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    region: str = ""  # empty: AWS_REGION / AWS_DEFAULT_REGION / the profile's
    endpoint_url: str = ""  # a local server (moto, LocalStack); empty: AWS's
    # The redrive policy `reminders setup --queue sqs` writes: receives before the DLQ.
    max_receive_count: int = Field(default=20, ge=1, le=1000)

    @field_validator("queue_urls", mode="before")
    @classmethod
    def _parse_urls(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        urls = {}
        for pair in (part.strip() for part in value.split(",") if part.strip()):
            queue, sep, url = pair.partition("=")
            if not sep or not url.strip().startswith(("https://", "http://")):
                raise ValueError(f"REMINDERS_SQS_QUEUE_URLS: {pair!r} is not queue=https://…")
            urls[queue.strip()] = url.strip()
        return urls
