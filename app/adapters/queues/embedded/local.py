"""Handing a round's messages to the receiver in this process (``reminders serve``).

The dispatcher gives the receiver a round's messages together, in chunks of at most its
concurrency, so the receiver can claim them together (``services/receive_batch``). Each
message still gets its own answer, turned here into what an HTTP push would have given:
acknowledged as a 2xx, anything else a redelivery with the receiver's Retry-After, and a
receiver that raised (or did not answer within the push timeout) as a lost answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from app.db.queue_repo import ClaimedMessage

from .pusher import PushResult

log = logging.getLogger("reminders.embedded_queue")


@dataclass(frozen=True, slots=True)
class LocalAnswer:
    """A receiver's answer handed back in process: ``acknowledged`` as a 2xx would be."""

    acknowledged: bool
    outcome: str
    retry_after: float | None = None


# Delivers messages to a receiver in this process: one answer per message, in order, or
# the exception receiving that message raised.
LocalDelivery = Callable[
    [Sequence[ClaimedMessage]], Awaitable[Sequence[LocalAnswer | BaseException]]
]


@dataclass(frozen=True, slots=True)
class LocalHandOff:
    """The in-process delivery of a dispatcher: bounded by its delivery slots."""

    deliver: LocalDelivery
    slots: asyncio.Semaphore
    # Held while a chunk takes its slots one by one: two chunks each holding some slots and
    # waiting for more would wait for each other for ever.
    taking: asyncio.Lock
    concurrency: int
    timeout_seconds: float
    stopping: Callable[[], bool]

    async def push_all(self, claimed: Sequence[ClaimedMessage]) -> list[PushResult]:
        """Deliver every claimed message, at most ``concurrency`` at a time."""
        size = self.concurrency
        chunks = [claimed[start : start + size] for start in range(0, len(claimed), size)]
        if len(chunks) == 1:
            return await self._chunk(chunks[0])
        parts = await asyncio.gather(*(self._chunk(chunk) for chunk in chunks))
        return [result for part in parts for result in part]

    async def _chunk(self, messages: Sequence[ClaimedMessage]) -> list[PushResult]:
        # A chunk takes a slot per message, never more than there are, and chunks take
        # theirs in turn: the slots a chunk waits for are held by chunks under way.
        async with self.taking:
            for _ in messages:
                await self.slots.acquire()
        try:
            if self.stopping():  # graceful: finish what runs, start nothing new
                return [PushResult(message, None, released=True) for message in messages]
            return await self._delivered(messages)
        finally:
            for _ in messages:
                self.slots.release()

    async def _delivered(self, messages: Sequence[ClaimedMessage]) -> list[PushResult]:
        # The timeout only stops the wait: the receiver finishes a claim's send and finalize
        # on its own (``Receiver.run_claim``), as it does when a pushing queue hangs up.
        try:
            async with asyncio.timeout(self.timeout_seconds):
                answers = await self.deliver(messages)
        except Exception as error:  # as a 500 or a lost answer would be: delivered again
            log.exception("in-process delivery of %d messages failed", len(messages))
            failed = f"in-process delivery failed: {error!r}"
            return [PushResult(message, None, error=failed) for message in messages]
        return [_result(message, answer) for message, answer in zip(messages, answers, strict=True)]


def _result(message: ClaimedMessage, answer: LocalAnswer | BaseException) -> PushResult:
    if isinstance(answer, BaseException):
        log.error("in-process delivery of %s failed", message.message_id, exc_info=answer)
        return PushResult(message, None, error=f"in-process delivery failed: {answer!r}")
    status = 200 if answer.acknowledged else 503
    retry_after = None if answer.retry_after is None else str(int(answer.retry_after or 1))
    return PushResult(message, status, retry_after, answer.outcome)
