"""The work on one claimed send: check the lease, render, send, finalize, record the attempt.

Runs shielded from the caller (``Receiver.run_claim``). The lease is checked where it
matters: right after the claim came back (a claim that waited on a row lock, a stalled
database or a paused process may commit a lease already over, and another delivery may
have reclaimed the row at once) and again right before the provider call; a lease that has
ended or ends within the safety margin (``lease_margin``) means no provider call. A renewal
refused during the call cancels it, and a call cut off after its request left is
``unknown_outcome``, never a plain timeout. Every attempt is appended to ``send_attempts``
at the claim and given its outcome by the finalize that ends it, or at the end when no
finalize ran (``attempts_repo``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime

from app.domain.errors import LeaseLost, LedgerUnavailable, ProviderError, TransientProviderError
from app.domain.failover import CircuitBreaker
from app.domain.ledger import (
    UNKNOWN_OUTCOME,
    AttemptEnd,
    Claimant,
    Decision,
    LedgerKey,
    SendRecordView,
    lease_margin,
    reason_not_to_send,
)
from app.domain.messages import CustomerView, Delivery, DeliveryPayload, ReminderView, SendResult
from app.domain.ports import ChannelProvider
from app.domain.states import ErrorClass, Outcome
from app.domain.suppression import ADDRESS_SUPPRESSED

from .lease import LeaseEnded, LeaseKeeper
from .receive_finalize import finalize_failure, finalize_sent, finalize_without_send, lease_lost
from .receive_model import Answer, Receiver, answer_for
from .suppress import address_suppressed, suppress_refused_recipient

log = logging.getLogger("reminders.receiver")

# Who claims, in the attempts' history: this host and process.
WORKER = f"{socket.gethostname()}:{os.getpid()}"


def claimant_for(provider: ChannelProvider) -> Claimant:
    """This process claiming a send through ``provider``, for the attempt's row."""
    return Claimant(WORKER, bool(getattr(provider, "deduplicates", False)))


@dataclass(slots=True)
class ClaimedSend:
    """One claim's work, from the claim to the recorded outcome."""

    receiver: Receiver
    delivery: Delivery
    payload: DeliveryPayload
    key: LedgerKey
    record: SendRecordView
    provider: ChannelProvider
    # How the attempt ended, for its row in send_attempts: written by the finalize that
    # ends it (``recorded``), else on its own at the end.
    outcome: str | None = None
    error_class: str | None = None
    provider_called: bool = False
    recorded: bool = False
    keeper: LeaseKeeper | None = field(default=None)
    # The provider's circuit (failover only): told how the call ended.
    breaker: CircuitBreaker | None = None

    async def run(self, context: tuple[ReminderView, CustomerView]) -> Answer:
        """Do the work (the claim appended the attempt), record how it ended."""
        try:
            return await self._work(*context)
        finally:
            await self._record_outcome()

    async def _work(self, reminder: ReminderView, customer: CustomerView) -> Answer:
        receiver, key, record = self.receiver, self.key, self.record
        if not self._lease_usable(record.lease_until):
            # The claim came back too late to trust (it waited on a lock, the database or
            # a paused process): another delivery may hold the row already.
            return await self._give_back("lease_expired", Outcome.BUSY)
        if self.payload.schedule_version != reminder.schedule_version:
            # Rescheduled: the current version's message will come. The claim goes back
            # without spending an attempt.
            return await self._give_back(Outcome.STALE.value, Outcome.STALE)
        reason = reason_not_to_send(
            reminder, customer, channel=self.payload.channel, now=receiver.clock(),
            grace=receiver.policy.usefulness_grace,
        )  # fmt: skip
        try:
            if reason is not None:
                self.outcome = reason.value
                return await self._recorded_by(
                    finalize_without_send(
                        receiver, key, record, reminder, reason, ended=self._ended()
                    )
                )
            if await address_suppressed(receiver, self.payload.channel, customer):
                self.outcome = ADDRESS_SUPPRESSED
                return await self._recorded_by(
                    finalize_without_send(
                        receiver, key, record, reminder, Outcome.SUPPRESSED, ADDRESS_SUPPRESSED,
                        ended=self._ended(),
                    )
                )  # fmt: skip
            return await self._send(reminder, customer)
        except LeaseLost:
            return lease_lost(receiver, key, record)

    async def _send(self, reminder: ReminderView, customer: CustomerView) -> Answer:
        receiver, key = self.receiver, self.key
        keeper = self.keeper = _lease_keeper(receiver, key, self.record)
        try:
            return await self._send_and_finalize(reminder, customer, keeper)
        finally:
            await keeper.release()

    async def _send_and_finalize(
        self, reminder: ReminderView, customer: CustomerView, keeper: LeaseKeeper
    ) -> Answer:
        receiver, key = self.receiver, self.key
        try:
            result = await self._render_and_call(reminder, customer, keeper)
        except LeaseEnded:
            return await self._give_back("lease_expired", Outcome.BUSY)
        except ProviderError as error:
            self.outcome = self.error_class = error.detail_class
            if self.breaker is not None:  # a refusal of this message is an answer: healthy
                failed = error.error_class != ErrorClass.PERMANENT
                self.breaker.record(receiver.clock(), failed=failed)
            record = keeper.renewed_record
            answer = await self._recorded_by(
                finalize_failure(
                    receiver, self.delivery, key, record, reminder, error, ended=self._ended()
                )
            )
            await suppress_refused_recipient(receiver, customer, error)
            return answer
        self.outcome = Outcome.SENT.value
        if self.breaker is not None:
            self.breaker.record(receiver.clock(), failed=False)
        return await self._recorded_by(
            finalize_sent(
                receiver, key, keeper.renewed_record, reminder, result, ended=self._ended()
            )
        )

    async def _render_and_call(
        self, reminder: ReminderView, customer: CustomerView, keeper: LeaseKeeper
    ) -> SendResult:
        receiver, key, provider = self.receiver, self.key, self.provider
        message = receiver.renderer.render(reminder, customer, key.channel)
        if not self._lease_usable(keeper.lease_until):  # the last look before the request
            raise LeaseEnded()
        timeout = receiver.policy.provider_timeout_seconds
        self.provider_called = True
        try:
            # The provider honours the timeout itself; this outer bound only guards against
            # one that does not. Cut off there, the request had left: the provider may have
            # accepted it (unknown_outcome, not a plain timeout).
            async with asyncio.timeout(timeout + 1):
                return await keeper.run(
                    lambda: provider.send(
                        message, idempotency_key=key.idempotency_key, timeout=timeout
                    )
                )
        except ProviderError:
            raise
        except (TimeoutError, LeaseEnded) as error:
            raise TransientProviderError(
                f"provider call cut off ({type(error).__name__}): outcome unknown",
                detail_class=UNKNOWN_OUTCOME,
            ) from error
        except Exception as error:  # a provider bug must not lose the message: retry, then DLQ
            log.exception("provider %s raised an unclassified error", provider.name)
            raise TransientProviderError(
                f"unclassified provider error: {type(error).__name__}", detail_class="unclassified"
            ) from error

    def _lease_usable(self, lease_until: datetime | None) -> bool:
        # Too close to its end is as good as over: the call could outlive it.
        if lease_until is None:
            return True
        margin = lease_margin(self.receiver.policy.lease)
        return self.receiver.clock() < lease_until - margin

    async def _give_back(self, outcome: str, answer: Outcome) -> Answer:
        """No provider call: the claim goes back without spending the attempt (fenced: if
        another worker holds the row now, nothing changes)."""
        self.outcome = outcome
        receiver = self.receiver
        await receiver.ledger.release_claim(self.record, now=receiver.clock())
        if answer == Outcome.BUSY:
            log.warning("claim of %s not used: %s", self.key.idempotency_key, outcome)
            decision = Decision(Outcome.BUSY, 1.0, outcome)
            return answer_for(decision, self.key, self.record, claimed=True)
        return answer_for(Decision(answer), self.key, self.record, claimed=True)

    def _ended(self) -> AttemptEnd:
        assert self.outcome is not None  # set before any finalize
        return AttemptEnd(self.outcome, self.provider_called, self.error_class)

    async def _recorded_by(self, finalize: Awaitable[Answer]) -> Answer:
        """A finalize given ``_ended()``: once it committed, so did the attempt's outcome."""
        answer = await finalize
        self.recorded = True
        return answer

    async def _record_outcome(self) -> None:
        # Not ended (the database went away mid-work), or written with the finalize.
        if self.outcome is None or self.recorded:
            return
        try:
            await self.receiver.ledger.record_outcome(
                self.record, self._ended(), now=self.receiver.clock()
            )
        except LedgerUnavailable as error:  # the ledger row holds the result; history waits
            log.warning("outcome of %s not recorded: %s", self.key.idempotency_key, error)


def _lease_keeper(receiver: Receiver, key: LedgerKey, record: SendRecordView) -> LeaseKeeper:
    lease_until = record.lease_until or receiver.clock() + receiver.policy.lease
    return LeaseKeeper(
        receiver.ledger, receiver.clock, receiver.renewal_sleep, receiver.policy.lease, key,
        record,
        lease_until,
    )  # fmt: skip
