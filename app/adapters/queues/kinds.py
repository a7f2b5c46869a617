"""Every queue kind: one line each. Everything that lists kinds reads this tuple.

Adding a kind is its package ``app/adapters/queues/<kind>/`` (exporting ``KIND``) and one
line here; see "Adding a queue kind" in docs/architecture.md.
"""

from __future__ import annotations

from . import cloudtasks, embedded, infrai, memory, pubsub, qstash, rabbitmq, sns, sqs
from .kind import QueueKind

QUEUE_KINDS: tuple[QueueKind, ...] = (
    memory.KIND,
    embedded.KIND,
    infrai.KIND,
    cloudtasks.KIND,
    pubsub.KIND,
    sns.KIND,
    qstash.KIND,
    rabbitmq.KIND,
    sqs.KIND,
)
KINDS_BY_NAME: dict[str, QueueKind] = {kind.name: kind for kind in QUEUE_KINDS}
KIND_NAMES: tuple[str, ...] = tuple(KINDS_BY_NAME)
