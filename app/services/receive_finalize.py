"""The receiver's last phase: record what happened to a claimed send, fenced on its attempt.

Every finalize is retried while the database is unreachable (``durable``); a finalize the
fence refuses means another worker took the row after our lease ended (``LeaseLost``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from app.domain.errors import ProviderError, WebhookGone
from app.domain.ledger import (
    UNKNOWN_OUTCOME,
    AttemptEnd,
    DeadLetterEntry,
    Decision,
    LedgerKey,
    SendRecordView,
    fit_request_id,
    plan_failure,
    truncate_error,
)
from app.domain.messages import Delivery, ReminderView, SendResult
from app.domain.states import DeadLetterReason, Outcome, SendState

from .durable import FinalizeRetry, finalize_durably
from .receive_model import Answer, Receiver, answer_for, dead_letter

log = structlog.get_logger("reminders.receiver")


async def finalize_sent(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    result: SendResult,
    *,
    ended: AttemptEnd,
) -> Answer:
    """The provider accepted the message: the row becomes ``sent``."""
    now = receiver.clock()
    values = {
        "state": SendState.SENT.value,
        "outcome": Outcome.SENT.value,
        "sent_at": now,
        "provider_request_id": fit_request_id(result.provider_request_id),
        "next_attempt_at": None,
    }
    await _finalize(receiver, key, record, reminder, values, ended, now=now)
    receiver.sent.add(key, record.attempt_count, sent_at=now)  # committed: copies need no database
    return answer_for(Decision(Outcome.SENT), key, record, claimed=True)


async def finalize_without_send(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    reason: Outcome,
    error_class: str | None = None,
    *,
    ended: AttemptEnd,
) -> Answer:
    """Nothing is to be sent (cancelled, expired, opted out, ...): the row ends with why
    (``error_class``, else the outcome's name)."""
    now = receiver.clock()
    values = {
        "state": SendState.TERMINAL_FAILURE.value,
        "outcome": reason.value,
        "last_error_class": error_class or reason.value,
        "next_attempt_at": None,
    }
    await _finalize(receiver, key, record, reminder, values, ended, now=now)
    return answer_for(Decision(reason, detail=error_class), key, record, claimed=True)


async def finalize_failure(
    receiver: Receiver,
    delivery: Delivery,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    error: ProviderError,
    *,
    ended: AttemptEnd,
) -> Answer:
    """The provider refused or failed: retry later, give up, or dead-letter the send."""
    unknown = 0
    if error.detail_class == UNKNOWN_OUTCOME:  # this one, and those before it
        unknown = 1 + await receiver.ledger.count_outcomes(record, UNKNOWN_OUTCOME)
    now = receiver.clock()
    plan = plan_failure(
        error.error_class,
        unknown_outcomes=unknown,
        provider_retry_after=getattr(error, "retry_after", None),
        attempts_in_budget=record.attempts_in_budget,
        max_attempts=receiver.policy.max_attempts,
        policy=receiver.policy.backoff,
        rand=receiver.rand,
        now=now,
    )
    message = truncate_error(str(error))
    exhausted: DeadLetterEntry | None = None
    if plan.state == SendState.DEAD:
        exhausted = dead_letter(
            delivery, reason=DeadLetterReason.ATTEMPTS_EXHAUSTED, error_class=error.detail_class,
            error=message, key=key, record=record,
        )  # fmt: skip
    values = {
        "state": plan.state.value,
        "outcome": None if plan.state == SendState.PENDING else plan.outcome.value,
        "next_attempt_at": plan.next_attempt_at,
        "last_error_class": error.detail_class,
        "last_error": message,
    }
    await finalize_durably(
        finalize_retry(receiver, record), key, record, reminder, values,
        lambda: receiver.ledger.finalize_failed_send(
            record, reminder, now=now, values=values, dead_letter=exhausted,
            disable_webhook=isinstance(error, WebhookGone),  # 410: stop sending to this endpoint
            ended=ended,
        ),
    )  # fmt: skip
    return answer_for(
        Decision(plan.outcome, plan.retry_after, error.detail_class), key, record, claimed=True
    )


def lease_lost(receiver: Receiver, key: LedgerKey, record: SendRecordView) -> Answer:
    """Another worker reclaimed the row after our lease expired; its result stands."""
    # Ask the queue to come back: the redelivery will find the row final and acknowledge.
    log.error(
        "lease_lost",
        ledger_key=key.idempotency_key,
        attempt=record.attempt_count,
        error_class="lease_lost",
    )
    retry_after = max(1.0, receiver.policy.lease.total_seconds())
    return answer_for(Decision(Outcome.BUSY, retry_after, "lease lost"), key, record, claimed=True)


def finalize_retry(receiver: Receiver, record: SendRecordView) -> FinalizeRetry:
    """Retries of this record's finalize: until the lease it holds (as last renewed) ends."""
    return receiver.finalize_retry(record.lease_until or receiver.clock())


async def _finalize(
    receiver: Receiver,
    key: LedgerKey,
    record: SendRecordView,
    reminder: ReminderView,
    values: Mapping[str, Any],
    ended: AttemptEnd,
    *,
    now: datetime,
) -> None:
    await finalize_durably(
        finalize_retry(receiver, record), key, record, reminder, values,
        lambda: receiver.ledger.finalize_send(
            record, reminder, now=now, values=values, ended=ended
        ),
    )  # fmt: skip
