"""The Celery application, tuned for throughput (the settings bench/peers/compare.py found).

Environment: ``PEER_BROKER_URL`` (Redis), ``PEER_QUEUE`` (the queue's name, one per run so
runs never share messages), ``PEER_PREFETCH`` (worker_prefetch_multiplier).
"""

from __future__ import annotations

import os

from celery import Celery

QUEUE = os.environ.get("PEER_QUEUE", "reminders")

app = Celery(
    "celery_peer",
    broker=os.environ.get("PEER_BROKER_URL", "redis://127.0.0.1:6379/9"),
    include=["bench.peers.celery_peer.tasks"],
)
app.conf.update(
    # Nobody reads a task's return value: no result backend, no round trip per task.
    result_backend=None,
    task_ignore_result=True,
    # Acknowledge after the task ran: a worker killed mid-send leaves the message to be
    # delivered again, and the ledger's claim makes the repeat harmless.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    broker_transport_options={
        # Redis redelivers unacknowledged messages after this; longer than any backlog here.
        "visibility_timeout": 3600,
        # The channel's Redis connections (default 10): gevent's and threads' many slots
        # acknowledge at once, and at 10 the acks fail with "Too many connections".
        "max_connections": 256,
    },
    worker_prefetch_multiplier=int(os.environ.get("PEER_PREFETCH", "16")),
    task_default_queue=QUEUE,
    task_serializer="json",
    accept_content=["json"],
    worker_disable_rate_limits=True,
    # No remote control (celery inspect/control): one less queue polled per worker, and no
    # control bindings left in Redis when the benchmark's worker is gone.
    worker_enable_remote_control=False,
    broker_connection_retry_on_startup=True,
)
