"""The service's settings (prefix ``REMINDERS_``): database, queue, push, tokens, timing."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from app.domain.ledger import lease_margin
from app.domain.retry import BackoffPolicy
from app.settings.aws import QStashSettings, SnsSettings, check_aws_settings
from app.settings.channels import ChannelSettings, split_csv
from app.settings.database import DatabaseSettings
from app.settings.deliverability import DeliverabilitySettings
from app.settings.embedded import EmbeddedQueueSettings
from app.settings.extras import OTEL, QUEUE_KIND_EXTRAS
from app.settings.google import (
    CloudTasksSettings,
    GooglePushSettings,
    PubSubSettings,
    check_google_settings,
)
from app.settings.infrai import InfraiSettings, check_infrai_settings
from app.settings.problems import MissingSecrets, gather
from app.settings.rabbitmq import RabbitMQSettings
from app.settings.secrets import (
    CHOSEN_SECRETS,
    DEV_PUSH_SECRET,
    SECRET_FIELDS,
    dev_token,
    is_placeholder,
    strength_checks,
)
from app.settings.sqs import SqsSettings, check_sqs_settings
from app.settings.worker import WorkerSettings

# Every REMINDERS_QUEUE value; each has one entry in app/adapters/queues/registry.py.
QueueKind = Literal[
    "memory", "embedded", "infrai", "cloudtasks", "pubsub", "sns", "qstash", "rabbitmq", "sqs"
]


class Settings(DatabaseSettings, ChannelSettings, DeliverabilitySettings):
    """Every knob of the service; see the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    dev_mode: bool = False

    queue: QueueKind = "embedded"
    # A channel may use another queue kind than REMINDERS_QUEUE (e.g. webhooks via QStash).
    email_queue_kind: QueueKind | None = None
    webhook_queue_kind: QueueKind | None = None
    # The embedded queue's dispatcher: REMINDERS_EMBEDDED_* (app/settings/embedded.py).
    embedded: EmbeddedQueueSettings = Field(default_factory=EmbeddedQueueSettings)
    queue_name: str = "reminders"
    # One queue per channel (explicit fan-out); empty → REMINDERS_QUEUE_NAME.
    email_queue: str = ""
    webhook_queue: str = ""
    infrai: InfraiSettings = Field(default_factory=InfraiSettings)  # REMINDERS_INFRAI_*
    cloudtasks: CloudTasksSettings = Field(default_factory=CloudTasksSettings)
    pubsub: PubSubSettings = Field(default_factory=PubSubSettings)
    google_push: GooglePushSettings = Field(default_factory=GooglePushSettings)
    sns: SnsSettings = Field(default_factory=SnsSettings)  # REMINDERS_SNS_*
    qstash: QStashSettings = Field(default_factory=QStashSettings)  # REMINDERS_QSTASH_*
    worker: WorkerSettings = Field(default_factory=WorkerSettings)  # REMINDERS_WORKER_*
    rabbitmq: RabbitMQSettings = Field(default_factory=RabbitMQSettings)  # REMINDERS_RABBITMQ_*
    sqs: SqsSettings = Field(default_factory=SqsSettings)  # REMINDERS_SQS_*
    public_base_url: str = "http://127.0.0.1:8000"

    push_secrets: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    push_signature_header: str = "X-Infrai-Signature"
    push_timestamp_header: str = "X-Infrai-Timestamp"
    push_timestamp_tolerance_seconds: int = Field(default=300, ge=1)
    push_max_body_bytes: int = Field(default=256 * 1024 + 16 * 1024, ge=1024)
    # Refuse pushes signed without a timestamp (they could be replayed forever; harmless to
    # the ledger, but a queue that always sends one should say so).
    push_require_timestamp: bool = False
    # A request body not complete by then is answered 408 (app/api/guard.py).
    body_read_timeout_seconds: float = Field(default=30.0, gt=0)

    cron_token: SecretStr = SecretStr("")
    api_token: SecretStr = SecretStr("")
    admin_token: SecretStr = SecretStr("")

    lease_seconds: float = Field(default=60.0, gt=0)
    provider_timeout_seconds: float = Field(default=20.0, gt=0)
    max_attempts: int = Field(default=8, ge=1)
    backoff_base_seconds: float = Field(default=10.0, gt=0)
    backoff_cap_seconds: float = Field(default=3600.0, gt=0)
    usefulness_grace_seconds: float = Field(default=86400.0, ge=0)

    sweep_batch_size: int = Field(default=5000, ge=1, le=10000)
    sweep_time_budget_seconds: float = Field(default=60.0, gt=0, le=840)
    sweep_claim_seconds: float = Field(default=120.0, gt=0)
    # Done and cancelled reminders (with their ledger rows) and redriven dead letters are
    # deleted this long after their last change, by the sweep and `reminders purge`; 0 keeps
    # them forever.
    retention_days: float = Field(default=90.0, ge=0)
    retention_batch_size: int = Field(default=500, ge=1, le=10000)
    # A send not final whose queue message is this much overdue is published again.
    catchup_margin_seconds: float = Field(default=1800.0, ge=60)

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # auto: a console format on a terminal, JSON lines anywhere else (containers, files).
    log_format: Literal["auto", "json", "console"] = "auto"
    # OpenTelemetry traces (the `otel` extra), exported as the standard OTEL_* variables say.
    otel_enabled: bool = False
    readyz_timeout_seconds: float = Field(default=2.0, gt=0, le=30)
    # `serve --workers N`: how long uvicorn waits for a worker's health-check answer before
    # it kills and replaces it. uvicorn's 5 s is shorter than N workers importing the app at
    # once on a small machine take, which killed a worker on every start (issue 23).
    worker_healthcheck_seconds: int = Field(default=30, ge=1)
    admin_session_seconds: float = Field(default=8 * 3600, gt=0)
    # Failed credential checks (bearer tokens, admin login, push signatures) allowed per
    # client address and for the whole process in each window; beyond them: 429.
    auth_failures_per_client: int = Field(default=20, ge=1)
    auth_failures_global: int = Field(default=200, ge=1)
    auth_failure_window_seconds: float = Field(default=60.0, gt=0, le=3600)
    # Bearer token of GET /metrics: required outside dev mode unless REMINDERS_METRICS_PUBLIC
    # opens the route (then restrict it at the network).
    metrics_token: SecretStr = SecretStr("")
    metrics_public: bool = False
    # How often one background task reads the ledger gauges and runs the audit for /metrics
    # (scrapes are served from memory in between).
    metrics_interval_seconds: float = Field(default=30.0, gt=0, le=3600)

    @field_validator("push_secrets", mode="before")
    @classmethod
    def _parse_push_secrets(cls, value: object) -> object:
        return split_csv(value)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        # Every check runs, so one start names everything that must be fixed.
        gather(
            [
                self._check_timeouts,
                self._fill_dev_secrets if self.dev_mode else self._refuse_placeholder_secrets,
                lambda: check_infrai_settings(
                    self.infrai,
                    queue="infrai" if "infrai" in self.queue_kinds_in_use else self.queue,
                    delivery_seconds=self.delivery_seconds,
                    max_attempts=self.max_attempts,
                    dev_mode=self.dev_mode,
                ),
                lambda: self.check_channels(dev_mode=self.dev_mode),
                self._check_queue_kinds,
                self._check_queue_extras,
                self._check_embedded_retries,
                lambda: check_sqs_settings(
                    self.queue_kinds_in_use, self.sqs, max_attempts=self.max_attempts
                ),
                self._check_embedded_push_timeout,
                self._check_embedded_visibility,
                self._check_tracing,
                *([] if self.dev_mode else strength_checks(self._chosen_secrets())),
            ]
        )
        return self

    def _chosen_secrets(self) -> list[tuple[str, str]]:
        """Every credential this deployment chooses itself, by variable (set ones only:
        missing ones are reported as such)."""
        named = [(f"REMINDERS_{name.upper()}", getattr(self, name)) for name in CHOSEN_SECRETS]
        named += [
            (f"REMINDERS_PUSH_SECRETS (#{position})", secret)
            for position, secret in enumerate(self.push_secrets, start=1)
        ]
        return [
            (name, secret.get_secret_value())
            for name, secret in named
            if not is_placeholder(secret)
        ]

    def _check_timeouts(self) -> None:
        margin = lease_margin(timedelta(seconds=self.lease_seconds)).total_seconds()
        if self.provider_timeout_seconds + margin >= self.lease_seconds:
            raise ValueError(
                f"REMINDERS_PROVIDER_TIMEOUT_SECONDS plus a {margin:g} s safety margin must be "
                "below REMINDERS_LEASE_SECONDS so a lease never expires while its worker is "
                "still waiting on a provider"
            )

    @property
    def delivery_seconds(self) -> float:
        """The longest one delivery may take: the provider timeout, then the finalize,
        retried for as long as the lease lasts (a double send if a queue gives up sooner)."""
        return self.provider_timeout_seconds + self.lease_seconds

    @property
    def embedded_push_timeout(self) -> float:
        """The dispatcher's push timeout: configured, else a delivery's bound plus 10 s."""
        return self.embedded.push_timeout_seconds or self.delivery_seconds + 10

    @property
    def embedded_visibility_timeout(self) -> float:
        """How long a pushed message stays hidden: configured, else the push timeout + 30 s."""
        return self.embedded.visibility_timeout_seconds or self.embedded_push_timeout + 30

    def _check_embedded_push_timeout(self) -> None:
        configured = self.embedded.push_timeout_seconds
        if configured is not None and configured <= self.delivery_seconds:
            raise ValueError(
                "REMINDERS_EMBEDDED_PUSH_TIMEOUT_SECONDS must exceed "
                "REMINDERS_PROVIDER_TIMEOUT_SECONDS + REMINDERS_LEASE_SECONDS (the finalize's "
                f"budget), {self.delivery_seconds:g} s: a push given up sooner is redelivered "
                "while its send may still be finalizing"
            )

    def _check_embedded_visibility(self) -> None:
        configured = self.embedded.visibility_timeout_seconds
        if configured is not None and configured <= self.embedded_push_timeout:
            raise ValueError(
                "REMINDERS_EMBEDDED_VISIBILITY_TIMEOUT_SECONDS must exceed the push timeout, "
                f"{self.embedded_push_timeout:g} s, or a slow push is redelivered while it is "
                "still running"
            )

    def _check_tracing(self) -> None:
        if self.otel_enabled and not OTEL.installed():
            raise ValueError(OTEL.hint("REMINDERS_OTEL_ENABLED=true"))

    def _check_queue_extras(self) -> None:
        # Before anything imports a kind's client library: one line naming the extra.
        missing = [
            extra.hint(self._queue_kind_variable(kind))
            for kind, extra in sorted(QUEUE_KIND_EXTRAS.items())
            if kind in self.queue_kinds_in_use and not extra.installed()
        ]
        if missing:
            raise ValueError("; ".join(missing))

    def _queue_kind_variable(self, kind: str) -> str:
        """The setting that chose ``kind`` (``REMINDERS_QUEUE=pubsub``, or a channel's own)."""
        if self.queue == kind:
            return f"REMINDERS_QUEUE={kind}"
        channel = next(c for c, k in self.channel_queue_kinds.items() if k == kind)
        return f"REMINDERS_{channel.upper()}_QUEUE_KIND={kind}"

    def _check_embedded_retries(self) -> None:
        if "embedded" in self.queue_kinds_in_use and self.embedded.max_retries <= self.max_attempts:
            # The queue must keep redelivering until our own ledger gives up (and records a
            # dead letter); busy answers count as queue retries too.
            raise ValueError(
                "REMINDERS_EMBEDDED_MAX_RETRIES must be above REMINDERS_MAX_ATTEMPTS "
                "so the queue never drops a message our ledger would still retry"
            )

    def _check_queue_kinds(self) -> None:
        kinds: dict[str, str] = {}
        for channel, queue in self.channel_queues.items():
            kind = self.channel_queue_kinds[channel]
            if kinds.setdefault(queue, kind) != kind:
                raise ValueError(
                    f"queue {queue!r} is given two kinds ({kinds[queue]}, {kind}): give each "
                    "channel with its own kind its own queue name"
                )
        check_google_settings(
            self.queue_kinds_in_use,
            cloudtasks=self.cloudtasks,
            pubsub=self.pubsub,
            max_attempts=self.max_attempts,
            provider_timeout_seconds=self.provider_timeout_seconds,
        )
        sns_queues = {queue for queue, kind in self.queue_kinds.items() if kind == "sns"}
        check_aws_settings(
            self.queue_kinds_in_use, sns_queues=sns_queues, sns=self.sns, qstash=self.qstash
        )

    def _refuse_placeholder_secrets(self) -> None:
        missing = [
            f"REMINDERS_{name.upper()}"
            for name in SECRET_FIELDS
            if is_placeholder(getattr(self, name))
        ]
        if not self.push_secrets or any(is_placeholder(s) for s in self.push_secrets):
            missing.append("REMINDERS_PUSH_SECRETS")
        if not self.metrics_public and is_placeholder(self.metrics_token):
            missing.append("REMINDERS_METRICS_TOKEN")  # or REMINDERS_METRICS_PUBLIC=true
        if missing:
            raise MissingSecrets(missing)

    def _fill_dev_secrets(self) -> None:
        # Dev mode only: well-known values so the one-command run works without setup.
        for name in SECRET_FIELDS:
            if not getattr(self, name).get_secret_value():
                object.__setattr__(self, name, SecretStr(dev_token(name)))
        if not self.push_secrets:
            object.__setattr__(self, "push_secrets", [SecretStr(DEV_PUSH_SECRET)])

    @property
    def backoff(self) -> BackoffPolicy:
        """The retry policy these settings describe."""
        return BackoffPolicy(self.backoff_base_seconds, self.backoff_cap_seconds)

    @property
    def channel_queues(self) -> dict[str, str]:
        """The queue each channel publishes to (one queue per channel when configured)."""
        return {
            "email": self.email_queue or self.queue_name,
            "webhook": self.webhook_queue or self.queue_name,
        }

    @property
    def channel_queue_kinds(self) -> dict[str, str]:
        """The queue kind each channel publishes through."""
        return {
            "email": self.email_queue_kind or self.queue,
            "webhook": self.webhook_queue_kind or self.queue,
        }

    @property
    def queue_kinds(self) -> dict[str, str]:
        """Every configured queue name and its kind (the names ``/push/{queue}`` serves)."""
        queues = self.channel_queues
        return {queues[channel]: kind for channel, kind in self.channel_queue_kinds.items()}

    @property
    def queue_kinds_in_use(self) -> set[str]:
        """The queue kinds some channel uses."""
        return set(self.channel_queue_kinds.values())

    def push_url(self, queue: str) -> str:
        """The public URL of a queue's push route (QStash's destination and ``sub``)."""
        return f"{self.public_base_url.rstrip('/')}/push/{queue}"

    def queue_for_channel(self, channel: str) -> str:
        """The queue a channel's messages go to; unknown channels use REMINDERS_QUEUE_NAME."""
        return self.channel_queues.get(channel, self.queue_name)
