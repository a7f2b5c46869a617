"""A queue as the drills play it: each (reminder, channel) delivered to a receiver until an
answer acknowledges it, coming back after the answer's Retry-After (shortened to at most
2 s: the drills run on the real clock)."""

from __future__ import annotations

import asyncio
import collections

from app.domain.messages import Delivery
from app.services.receive import receive_delivery
from app.services.receive_model import Receiver


async def deliver_until_acknowledged(
    receiver: Receiver,
    waiting: collections.deque[tuple[str, str]],
    answers: collections.Counter[str],
    failures: list[BaseException],
) -> None:
    """One consumer of ``waiting``: counts each answer's outcome, and each exception (a 500
    over HTTP) in ``failures``, putting back what was not acknowledged."""
    while waiting:
        rid, channel = waiting.popleft()
        payload = {"v": 1, "reminder_id": rid, "channel": channel, "schedule_version": 1}
        delivery = Delivery(queue="reminders", message_id=f"{rid}:{channel}", payload=payload)
        try:
            answer = await receive_delivery(receiver, delivery)
        except Exception as error:  # over HTTP: a 500
            failures.append(error)
            answer = None
        if answer is not None:
            answers[answer.outcome.value] += 1
        if answer is None or not answer.outcome.acknowledges:
            await asyncio.sleep(min(answer.retry_after or 1, 2) if answer else 1)
            waiting.append((rid, channel))
