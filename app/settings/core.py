"""The service's settings (prefix ``REMINDERS_``): database, queue, push, tokens, timing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

from pydantic import Field, SecretStr, create_model, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.adapters.queues.kinds import KIND_NAMES, QUEUE_KINDS
from app.domain.ledger import lease_margin
from app.domain.retry import BackoffPolicy
from app.settings.channels import ChannelSettings, split_csv
from app.settings.database import DatabaseSettings
from app.settings.deliverability import DeliverabilitySettings
from app.settings.extras import OTEL, Extra, queue_extras
from app.settings.local_only import OUTBOX, check_email_from, check_public_base_url, outbox_warnings
from app.settings.problems import MissingSecrets, gather
from app.settings.secrets import (
    CHOSEN_SECRETS,
    DEV_PUSH_SECRET,
    SECRET_FIELDS,
    dev_token,
    is_placeholder,
    strength_checks,
)
from app.settings.worker import WorkerSettings

if TYPE_CHECKING:
    from app.adapters.queues.cloudtasks.settings import CloudTasksSettings
    from app.adapters.queues.embedded.settings import EmbeddedQueueSettings
    from app.adapters.queues.google_settings import GooglePushSettings
    from app.adapters.queues.infrai.settings import InfraiSettings
    from app.adapters.queues.pubsub.settings import PubSubSettings
    from app.adapters.queues.qstash.settings import QStashSettings
    from app.adapters.queues.rabbitmq.settings import RabbitMQSettings
    from app.adapters.queues.sns.settings import SnsSettings
    from app.adapters.queues.sqs.settings import SqsSettings

# Every REMINDERS_QUEUE value: the names of the kinds (app/adapters/queues/kinds.py). mypy
# sees a str; pydantic checks the Literal (its error names every accepted value).
if TYPE_CHECKING:
    QueueKind = str
else:
    QueueKind = Literal[KIND_NAMES]

# By the name a queue kind gives as its ``extra``, and OpenTelemetry's.
EXTRAS: dict[str, Extra] = {**queue_extras(QUEUE_KINDS), OTEL.name: OTEL}


G = TypeVar("G", bound=BaseSettings)


def group_name(cls: type[BaseSettings]) -> str:
    """The ``Settings`` field of a settings group: its variables' prefix
    (``REMINDERS_RABBITMQ_`` → ``rabbitmq``)."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    name = prefix.removeprefix("REMINDERS_").rstrip("_").lower()
    if not name or not prefix.startswith("REMINDERS_"):
        raise TypeError(f"{cls.__name__}: its env_prefix must be REMINDERS_<NAME>_")
    return name


# Every queue kind's settings groups, as fields read from their REMINDERS_<NAME>_* variables:
# built from QUEUE_KINDS, so a new kind's group needs no line here. mypy sees a plain base
# (the fields are typed in Settings below).
if TYPE_CHECKING:
    QueueKindGroups = BaseSettings
else:
    QueueKindGroups = create_model(
        "QueueKindGroups",
        __base__=BaseSettings,
        **{
            group_name(cls): (cls, Field(default_factory=cls))
            for kind in QUEUE_KINDS
            for cls in kind.settings
        },
    )


class Settings(DatabaseSettings, ChannelSettings, DeliverabilitySettings, QueueKindGroups):
    """Every knob of the service; see the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix="REMINDERS_", extra="ignore")

    queue: QueueKind = "embedded"
    # A channel may use another queue kind than REMINDERS_QUEUE (e.g. webhooks via QStash).
    email_queue_kind: QueueKind | None = None
    webhook_queue_kind: QueueKind | None = None
    queue_name: str = "reminders"
    # One queue per channel (explicit fan-out); empty → REMINDERS_QUEUE_NAME.
    email_queue: str = ""
    webhook_queue: str = ""
    # The queue kinds' groups are fields of QueueKindGroups (above). These lines only name
    # their types for mypy, which cannot see fields made at run time: a kind's own code may
    # instead read its group with ``settings.group(ItsSettings)``, typed, with no line here.
    if TYPE_CHECKING:
        embedded: EmbeddedQueueSettings = Field(default_factory=EmbeddedQueueSettings)
        infrai: InfraiSettings = Field(default_factory=InfraiSettings)
        cloudtasks: CloudTasksSettings = Field(default_factory=CloudTasksSettings)
        pubsub: PubSubSettings = Field(default_factory=PubSubSettings)
        google_push: GooglePushSettings = Field(default_factory=GooglePushSettings)
        sns: SnsSettings = Field(default_factory=SnsSettings)
        qstash: QStashSettings = Field(default_factory=QStashSettings)
        rabbitmq: RabbitMQSettings = Field(default_factory=RabbitMQSettings)
        sqs: SqsSettings = Field(default_factory=SqsSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)  # REMINDERS_WORKER_*
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
    sweep_workers: int = Field(default=2, ge=1, le=8)
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
    worker_healthcheck_seconds: int = Field(default=60, ge=1)
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
                self.require_database_url,
                self._check_timeouts,
                self._fill_dev_secrets if self.dev_mode else self._refuse_placeholder_secrets,
                lambda: self.check_channels(dev_mode=self.dev_mode),
                *self._real_mail_checks(),
                self._check_queue_kinds,
                self._check_queue_extras,
                # Each kind's own checks (each decides whether its kind is in use).
                *(partial(check, self) for kind in QUEUE_KINDS for check in kind.settings_checks),
                self._check_tracing,
                *([] if self.dev_mode else strength_checks(self._chosen_secrets())),
            ]
        )
        return self

    def _real_mail_checks(self) -> list[Callable[[], None]]:
        """Outside dev mode, with a real email provider: no localhost address or link in it."""
        if self.dev_mode or set(self.email_chain) == {OUTBOX}:
            return []
        variable = (
            "REMINDERS_EMAIL_PROVIDERS" if self.email_providers else "REMINDERS_EMAIL_PROVIDER"
        )
        chosen = f"{variable}={','.join(self.email_chain)}"
        return [
            lambda: check_public_base_url(self.public_base_url, chosen=chosen),
            lambda: check_email_from(self.email_from, chosen=chosen),
        ]

    def local_only_warnings(self) -> list[str]:
        """What startup warns about: outside dev mode, a channel left on the outbox while
        another one sends for real."""
        return [] if self.dev_mode else outbox_warnings(self.channel_providers)

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
        visibility = self.worker.visibility_timeout_seconds
        if visibility and visibility <= self.lease_seconds:
            raise ValueError(
                "REMINDERS_WORKER_VISIBILITY_TIMEOUT_SECONDS must exceed REMINDERS_LEASE_SECONDS "
                "(or be 0: twice the lease) so a pulled message does not come back while its "
                "claim is still trusted"
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

    def _check_tracing(self) -> None:
        if self.otel_enabled and not OTEL.installed():
            raise ValueError(OTEL.hint("REMINDERS_OTEL_ENABLED=true"))

    def _check_queue_extras(self) -> None:
        # Before anything imports a kind's client library: one line naming the extra.
        missing = [
            EXTRAS[kind.extra].hint(self._queue_kind_variable(kind.name))
            for kind in sorted(QUEUE_KINDS, key=lambda kind: kind.name)
            if kind.extra is not None
            and kind.name in self.queue_kinds_in_use
            and not EXTRAS[kind.extra].installed()
        ]
        if missing:
            raise ValueError("; ".join(missing))

    def _queue_kind_variable(self, kind: str) -> str:
        """The setting that chose ``kind`` (``REMINDERS_QUEUE=pubsub``, or a channel's own)."""
        if self.queue == kind:
            return f"REMINDERS_QUEUE={kind}"
        channel = next(c for c, k in self.channel_queue_kinds.items() if k == kind)
        return f"REMINDERS_{channel.upper()}_QUEUE_KIND={kind}"

    def _check_queue_kinds(self) -> None:
        kinds: dict[str, str] = {}
        for channel, queue in self.channel_queues.items():
            kind = self.channel_queue_kinds[channel]
            if kinds.setdefault(queue, kind) != kind:
                raise ValueError(
                    f"queue {queue!r} is given two kinds ({kinds[queue]}, {kind}): give each "
                    "channel with its own kind its own queue name"
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

    def group(self, cls: type[G]) -> G:
        """A queue kind's settings group, typed (``settings.group(SqsSettings)``)."""
        found = getattr(self, group_name(cls))
        if not isinstance(found, cls):
            raise TypeError(f"{group_name(cls)} is a {type(found).__name__}, not {cls.__name__}")
        return found

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

    def queues_of_kind(self, kind: str) -> list[str]:
        """The configured queue names of one kind, sorted (what its setup, check and
        publisher cover)."""
        return sorted(queue for queue, its_kind in self.queue_kinds.items() if its_kind == kind)

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
