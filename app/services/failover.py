"""Failover between the providers of one channel (``REMINDERS_EMAIL_PROVIDERS=ses,smtp``).

The provider is chosen before the claim, so the claim's row is that provider's. In list
order: a provider whose row was handed over is skipped; the first other one is claimed
when its circuit lets a call through (or it is the last). A provider whose circuit is open
hands the (reminder, channel) to the next one only when the ledger proves it never
accepted the message (``ledger.hand_over``, ``ledger_rules.may_hand_over``); otherwise the
send stays with that provider and its own retries, circuit or not. Every claim here
keeps the failover rule in the database (``ledger_rules.others_handed_over``), so a
replica with another view of the circuits cannot claim a second provider while the first
one's row is held, pending or sent. Only channels with two or more providers come here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime

from app.domain.failover import CircuitState
from app.domain.ledger import LedgerKey, ProviderRow, answer_unclaimed
from app.domain.messages import Delivery, DeliveryPayload
from app.domain.ports import ChannelProvider
from app.domain.states import Outcome
from app.observability.metrics import record_failover

from .receive_model import Answer, Receiver, answer_for, duplicate_of_sent

log = logging.getLogger("reminders.receiver")

# ``receive.claim_and_send``: passed in, as ``receive`` imports this module.
ClaimAndSend = Callable[..., Awaitable[Answer]]


async def receive_with_failover(
    receiver: Receiver,
    delivery: Delivery,
    payload: DeliveryPayload,
    chain: Sequence[ChannelProvider],
    claim_and_send: ClaimAndSend,
) -> Answer:
    """Deliver through the first provider of ``chain`` that may take the send now."""
    now = receiver.clock()
    for provider in chain:  # sent by this process a moment ago: no database round trip
        key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
        if (sent_by := receiver.sent.get(key, now)) is not None:
            return duplicate_of_sent(key, sent_by)
    rows = await receiver.ledger.channel_rows(payload.reminder_id, payload.channel)
    names = tuple(provider.name for provider in chain)
    for index, provider in enumerate(chain):
        row = rows.get(provider.name)
        if row is not None and row.handed_over:
            continue
        held = _held_by_another(rows, provider.name)
        if held is not None:  # another provider's send (a reordered list): it decides
            return _answer_for_row(payload, *held, now=now)
        breaker = receiver.breakers[provider.name]
        if index == len(chain) - 1 or (_due(row, now) and breaker.allow(now)):
            return await claim_and_send(
                receiver, delivery, payload, provider, now=now, earlier=names[:index]
            )
        key = LedgerKey(payload.reminder_id, payload.channel, provider.name)
        if not await receiver.ledger.hand_over(key, now=now):
            # Not provably unaccepted (an unknown outcome, a held or final row): the send
            # stays with this provider and its own retries, whatever the circuit says; the
            # claim answers as for one provider (busy, retry not due, duplicate, ...).
            return await claim_and_send(
                receiver, delivery, payload, provider, now=now, earlier=names[:index]
            )
        rows.pop(provider.name, None)  # handed over now: no longer in the way
        record_failover(payload.channel, provider.name)
        log.info("failover of %s from %s: circuit open", key.idempotency_key, provider.name)
    return Answer(Outcome.BUSY, 60.0, payload.reminder_id, payload.channel, detail="no_provider")


def _due(row: ProviderRow | None, now: datetime) -> bool:
    """No row yet, or one whose retry time has come: a call could start (a half-open
    circuit's probe is not spent on a send that would answer "retry not due")."""
    retry_at = row.record.next_attempt_at if row is not None else None
    return retry_at is None or retry_at <= now


def _held_by_another(
    rows: Mapping[str, ProviderRow], provider: str
) -> tuple[str, ProviderRow] | None:
    for name, row in rows.items():
        if name != provider and not row.handed_over:
            return name, row
    return None


def _answer_for_row(
    payload: DeliveryPayload, provider: str, row: ProviderRow, *, now: datetime
) -> Answer:
    key = LedgerKey(payload.reminder_id, payload.channel, provider)
    return answer_for(answer_unclaimed(row.record, now), key, row.record, claimed=False)


def circuit_states(receiver: Receiver) -> list[tuple[str, str, CircuitState]]:
    """(channel, provider, circuit state) of every provider failover chooses among, now
    (this process's circuits; empty with one provider per channel)."""
    now = receiver.clock()
    return [
        (channel, provider.name, receiver.breakers[provider.name].state(now))
        for channel, chain in sorted(receiver.chains.items())
        for provider in chain
    ]
