"""The RabbitMQ topology of one channel queue ``Q`` and how a delay is routed through it.

RabbitMQ 3.10 has no delayed-message exchange without a plugin, so a delay is spent in
per-delay-bucket TTL queues that dead-letter back into the work queue:

* ``Q``: the work queue. Quorum, durable, ``x-delivery-limit`` (a message redelivered that
  often without an ack, e.g. one that crashes its worker, is dead-lettered by the broker)
  and ``x-dead-letter-exchange`` ``Q.dlx`` → ``Q.dead``.
* ``Q.delay.<n>s`` for n = 1, 2, 4, … up to the max delay: quorum queues whose messages all
  live exactly n seconds (a queue-wide TTL, so expiry is strictly first in, first out), then
  go back to ``Q`` through the default exchange.

A message delayed d seconds carries ``x-not-before`` (epoch milliseconds) and is published
into the largest bucket ≤ d. When it reaches ``Q`` with time still to wait, the consumer
puts it into the bucket for what is left and acks the copy it got: at most one hop per bit
of d (≤ 12 for an hour), each hop a publish the broker confirms before the ack. Our own
retry backoff (a nack) is the same route. ``docs/rabbitmq.md`` has the measurement behind
choosing buckets over publishing when due.
"""

from __future__ import annotations

from typing import Any

MILLIS = 1000.0
# Within this of its time a message is delivered, not parked again (a 1 s bucket would
# deliver it later than asked instead).
DUE_MARGIN_SECONDS = 0.5
NOT_BEFORE = "x-not-before"
ATTEMPT = "x-reminders-attempt"


def dead_exchange(queue: str) -> str:
    """The exchange the broker dead-letters ``queue``'s messages to."""
    return f"{queue}.dlx"


def dead_queue(queue: str) -> str:
    """Where dead-lettered messages wait for an operator (the sweep's catch-up resends)."""
    return f"{queue}.dead"


def delay_queue(queue: str, seconds: int) -> str:
    """The TTL queue that holds ``queue``'s messages ``seconds`` before returning them."""
    return f"{queue}.delay.{seconds}s"


def buckets(max_delay_seconds: int) -> list[int]:
    """Bucket lengths in seconds: the powers of two up to the max delay."""
    sizes = [1]
    while sizes[-1] * 2 <= max_delay_seconds:
        sizes.append(sizes[-1] * 2)
    return sizes


def route(queue: str, remaining: float, sizes: list[int]) -> str:
    """The routing key (a queue name on the default exchange) for a message with
    ``remaining`` seconds to wait: the work queue when due, else the largest bucket that
    does not overshoot."""
    if remaining < DUE_MARGIN_SECONDS:
        return queue
    fitting = [size for size in sizes if size <= max(remaining, 1.0)]
    return delay_queue(queue, fitting[-1])


def quorum(**arguments: Any) -> dict[str, Any]:
    """Quorum queue arguments; dead-lettering at least once (needs reject-publish)."""
    return {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        **arguments,
    }


def work_queue_arguments(queue: str, delivery_limit: int) -> dict[str, Any]:
    """The work queue's arguments."""
    return quorum(
        **{"x-delivery-limit": delivery_limit, "x-dead-letter-exchange": dead_exchange(queue)}
    )


def delay_queue_arguments(queue: str, seconds: int) -> dict[str, Any]:
    """A bucket's arguments: every message expires after ``seconds`` back into ``queue``."""
    return quorum(
        **{
            "x-message-ttl": int(seconds * MILLIS),
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": queue,
        }
    )
