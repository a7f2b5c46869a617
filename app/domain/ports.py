"""The Protocols the outer layers implement: queue publishers, channel providers, the ledger."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .email_events import ProviderEvent
from .ledger import (
    UNNAMED_CLAIMANT,
    AttemptEnd,
    Claim,
    Claimant,
    ClaimRequest,
    DeadLetterEntry,
    Earlier,
    LedgerKey,
    ProviderRow,
    SendRecordView,
)
from .messages import (
    Delivery,
    OutgoingMessage,
    PulledMessage,
    PushRequest,
    ReminderView,
    RenderedMessage,
    SendResult,
)
from .suppression import Suppression

# Infrai's (and most managed queues') message size ceiling.
MAX_MESSAGE_BYTES = 256 * 1024


class QueuePublisher(Protocol):
    """Publishes small delayed messages; ``max_delay_seconds`` bounds the sweep horizon."""

    name: str
    max_delay_seconds: float

    async def publish(self, message: OutgoingMessage) -> str:
        """Publish one message; return the queue's message id (same key → same id)."""
        ...

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        """Publish several messages; ids in the same order."""
        ...


class ChannelProvider(Protocol):
    """Sends a rendered message through one provider for one channel.

    Implementations must finish (or raise) within ``timeout`` seconds, pass
    ``idempotency_key`` to the provider where it supports one, and raise only
    ``TransientProviderError``, ``RateLimitedError`` or ``PermanentProviderError``.
    """

    name: str

    async def send(
        self, message: RenderedMessage, *, idempotency_key: str, timeout: float
    ) -> SendResult:
        """Deliver the message; return the provider's request id."""
        ...


class PushFormat(Protocol):
    """Authenticates and parses one queue vendor's push requests.

    ``authenticate`` is async because some schemes fetch the sender's public keys (Google's
    OIDC certificates, SNS signing certificates) on first use; ``parse`` sees the headers
    because some queues carry the message id and attempt there.
    """

    name: str

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the raw request is from the queue."""
        ...

    def parse(self, queue: str, request: PushRequest) -> Delivery:
        """The delivery in an authenticated request; ``MalformedDelivery`` when unusable."""
        ...


class ControlMessages(Protocol):
    """A push format whose queue also pushes messages that are not deliveries (SNS's
    subscription handshake); the route calls it after ``authenticate``."""

    async def handle_control(self, request: PushRequest) -> str | None:
        """Act on an authenticated control message and describe it; None for a delivery."""
        ...


class PullConsumer(Protocol):
    """Pulls messages from a queue for the pull worker (``reminders worker``).

    One implementation per pull queue kind (Infrai, SQS, RabbitMQ). ``receive`` leases
    messages for ``lease_seconds`` (SQS: the visibility timeout); the worker acks a message
    only after the finalize of its delivery committed, nacks it with our backoff, extends
    its lease while a slow send runs, and gives back the ones it received but never started
    when it stops. Connection failures raise ``QueueUnavailable``; the worker backs off and
    calls again (an implementation reconnects on the next call).
    """

    name: str
    # True when ``receive`` waits for messages itself (long polling, a broker's push):
    # the worker then needs no idle backoff of its own.
    long_polls: bool
    # True when a received message returns to the queue after ``lease_seconds`` unless
    # its lease is extended (SQS's visibility timeout): the worker extends it meanwhile.
    leases: bool

    async def receive(
        self, queue: str, *, max_messages: int, lease_seconds: int, wait_seconds: float
    ) -> list[PulledMessage]:
        """Lease up to ``max_messages``, waiting up to ``wait_seconds`` for the first."""
        ...

    async def ack(self, message: PulledMessage) -> None:
        """Delete a message that was handled (an ack outcome, finalize committed)."""
        ...

    async def nack(self, message: PulledMessage, *, delay: float) -> bool:
        """Redeliver after ``delay`` s; False when the queue has no way to (lease expiry)."""
        ...

    async def extend_lease(self, message: PulledMessage, *, seconds: int) -> None:
        """Keep a message leased ``seconds`` more while its send is under way."""
        ...

    async def abandon(self, message: PulledMessage) -> None:
        """A message whose handling raised: return it to the queue's own redelivery (SQS,
        Infrai: when its lease ends; RabbitMQ: requeued, counted against the delivery
        limit, so a message that always fails ends in the broker's dead-letter queue)."""
        ...

    async def give_back(self, messages: Sequence[PulledMessage]) -> None:
        """Make messages that were received but not started visible again at once."""
        ...

    async def backlog(self, queue: str) -> int | None:
        """Messages waiting in the queue (the worker's lag), None when it does not say."""
        ...

    async def close(self) -> None:
        """Release the connection; leased messages not acked return to the queue."""
        ...


class LedgerGateway(Protocol):
    """Every ledger write of a delivery, each call one short unit of work of its own.

    Implementations (``app/db/ledger/``) hold no connection between calls, so nothing is
    held while a provider is called. ``values`` name ``send_records`` columns a finalize
    sets. A fenced finalize raises ``LeaseLost`` when the row is no longer this attempt's
    (another worker reclaimed it after the lease expired); then nothing of it is written.
    A failed connection (not a refused statement) raises ``LedgerUnavailable``: the
    statement may or may not have taken effect, and the call may be retried.
    """

    @property
    def checked_out(self) -> int:
        """Database connections borrowed right now by this gateway."""
        ...

    async def claim_or_read(
        self,
        key: LedgerKey,
        *,
        now: datetime,
        lease_until: datetime,
        earlier: Earlier = None,
        claimant: Claimant = UNNAMED_CLAIMANT,
    ) -> Claim:
        """Take the lease on the row (creating it) and read the reminder and customer as they
        are now; not claimable: the row as it is now (None when the reminder does not exist,
        or, with ``earlier``, when the failover rule refused to create it). ``earlier``: the
        channel has several providers, these before ``key.provider`` (failover). A claim
        appends its attempt (by ``claimant``) to ``send_attempts`` in the same commit, so
        no claim is ever without its row in the history."""
        ...

    async def claim_many(self, requests: Sequence[ClaimRequest]) -> list[Claim | BaseException]:
        """``claim_or_read`` of several different keys (no failover rule) in as few
        statements as the database allows: one result per request, in order, an exception
        standing for that request alone. ``LedgerUnavailable`` when the database cannot be
        reached: then none of the results is known."""
        ...

    async def channel_rows(self, reminder_id: str, channel: str) -> dict[str, ProviderRow]:
        """Every provider's row of one (reminder, channel), by provider (failover)."""
        ...

    async def suppression_reasons(self, emails: Sequence[str]) -> dict[str, str]:
        """Which of these normalized addresses are on the suppression list, and why."""
        ...

    async def hand_over(self, key: LedgerKey, *, now: datetime) -> bool:
        """Give ``key``'s (reminder, channel) to the next provider when the ledger proves
        ``key.provider`` never accepted it; False when it does not (failover)."""
        ...

    async def get_send_record(self, key: LedgerKey) -> SendRecordView | None:
        """The ledger row for a key, if any."""
        ...

    async def release_claim(self, record: SendRecordView, *, now: datetime) -> bool:
        """Give a claim back without spending the attempt; False when it was no longer ours."""
        ...

    async def renew_lease(
        self, record: SendRecordView, *, now: datetime, lease_until: datetime
    ) -> bool:
        """Extend a live claim's lease while its send runs; False when the lease had already
        ended or the row is another attempt's."""
        ...

    async def finalize_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        ended: AttemptEnd | None = None,
    ) -> None:
        """Fenced finalize; when the row became final, mark the reminder done if all are.
        ``ended``: the attempt's outcome, written with the finalize (not if it is refused)."""
        ...

    async def finalize_failed_send(
        self,
        record: SendRecordView,
        reminder: ReminderView,
        *,
        now: datetime,
        values: Mapping[str, Any],
        dead_letter: DeadLetterEntry | None,
        disable_webhook: bool,
        ended: AttemptEnd | None = None,
    ) -> None:
        """``finalize_send`` plus, in the same transaction, the dead letter of an exhausted
        send and the webhook switched off after a 410."""
        ...

    async def settle_if_final(
        self, reminder: ReminderView, values: Mapping[str, Any], *, now: datetime
    ) -> None:
        """After a committed finalize that wrote ``values``: mark the reminder done if all
        its channels are final (a statement of its own, seeing every committed row)."""
        ...

    async def record_dead_letter(self, entry: DeadLetterEntry, *, now: datetime) -> None:
        """Keep an authentic but unusable delivery for operators (once per message id)."""
        ...

    async def record_outcome(
        self, record: SendRecordView, ended: AttemptEnd, *, now: datetime
    ) -> None:
        """Write, once, how this attempt ended (no finalize wrote it)."""
        ...

    async def count_outcomes(self, record: SendRecordView, outcome: str) -> int:
        """How many attempts of this send ended with ``outcome``."""
        ...


class SuppressionList(Protocol):
    """The addresses that receive no email; each call its own short unit of work."""

    async def reason_for(self, email: str) -> str | None:
        """Why a normalized address is suppressed, or None when it may receive email."""
        ...

    async def suppress(self, entry: Suppression, *, now: datetime) -> bool:
        """Put an address on the list (a stronger reason replaces a weaker one); True when
        a row was written."""
        ...


class EmailEventSource(Protocol):
    """One email provider's event webhook: authenticate the raw request, then read events.

    ``parse`` raises ``MalformedEvent`` for a body that is not the documented shape, and
    leaves out (rather than refuses) event types we do not act on.
    """

    name: str

    async def authenticate(self, request: PushRequest, *, now: float) -> None:
        """Raise ``Unauthenticated`` unless the provider sent this request."""
        ...

    def parse(self, request: PushRequest, *, now: datetime) -> list[ProviderEvent]:
        """The events in an authenticated request, in our vocabulary (``now`` stands in
        for an event time the provider left out)."""
        ...
