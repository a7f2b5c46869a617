"""One task per reminder: claim the ledger row, render, write the .eml, finalize.

Environment: ``PEER_DATABASE_URL`` (psycopg), ``PEER_OUTBOX_DIR``, ``PEER_DB_POOL`` (the
connection pool's size per worker process: 1 for prefork, the pool's concurrency for
threads or gevent), ``PEER_READY_FILE`` (touched when the worker is ready, so the
benchmark needs no INFO logging, which costs a line per task).
"""

from __future__ import annotations

import os
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from celery.signals import worker_ready
from psycopg_pool import ConnectionPool

from app.adapters.channels.eml import email_bytes
from app.adapters.channels.outbox import file_stem
from app.adapters.rendering import Renderer
from app.domain.messages import CustomerView, ReminderView

from .app import app

CHANNEL = "email"
SENDER = "reminders@localhost"  # the service's default REMINDERS_EMAIL_FROM
OUTBOX = Path(os.environ.get("PEER_OUTBOX_DIR", "/tmp/peer-outbox")) / CHANNEL

# The claim: the UNIQUE (reminder_id, channel) key decides who sends; a repeat finds the
# row taken and sends nothing, unless a worker died mid-send long ago (a claim older than
# any task runs), then it takes the row over and writes the same file again.
CLAIM = """INSERT INTO peer_ledger (reminder_id, channel, state, claimed_at)
VALUES (%s, %s, 'sending', now()) ON CONFLICT (reminder_id, channel) DO UPDATE
SET claimed_at = now() WHERE peer_ledger.state = 'sending'
AND peer_ledger.claimed_at < now() - interval '10 minutes' RETURNING 1"""
FINALIZE = """UPDATE peer_ledger SET state = 'sent', sent_at = now(), outbox_file = %s
WHERE reminder_id = %s AND channel = %s AND state = 'sending'"""

renderer = Renderer()  # the service's renderer: the same templates, the same output
_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()


def ledger() -> ConnectionPool:
    """This process's connection pool, opened on first use (after the prefork fork, so no
    two processes share a socket). Autocommit: the claim must be committed before the send."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ConnectionPool(
                os.environ["PEER_DATABASE_URL"],
                min_size=1,
                max_size=int(os.environ.get("PEER_DB_POOL", "1")),
                kwargs={"autocommit": True},
                open=True,
            )
    return _pool


@worker_ready.connect
def _announce_ready(**_: Any) -> None:
    if ready := os.environ.get("PEER_READY_FILE"):
        Path(ready).touch()


@app.task(name="send_reminder")
def send_reminder(reminder: dict[str, Any]) -> str | None:
    """Send one reminder's email once; the outbox file's name, or None if already claimed."""
    with ledger().connection() as conn:
        if conn.execute(CLAIM, (reminder["id"], CHANNEL)).fetchone() is None:
            return None  # sent (or being sent) by an earlier delivery of this message
        # The service's provider key (reminder:channel:provider): the same file name and
        # Message-ID, stable across redeliveries.
        key = f"{reminder['id']}:{CHANNEL}:outbox"
        name = f"{file_stem(key)}.eml"
        write_atomically(OUTBOX / name, render(reminder, key))
        conn.execute(FINALIZE, (f"{CHANNEL}/{name}", reminder["id"], CHANNEL))
    return name


def render(reminder: dict[str, Any], key: str) -> bytes:
    """The email's bytes, as the service's outbox provider writes them."""
    view = ReminderView(
        id=reminder["id"],
        customer_id=reminder["customer_id"],
        kind=reminder["kind"],
        state="enqueued",
        due_at=datetime.fromisoformat(reminder["due_at"]),
        expires_at=None,
        channels=(CHANNEL,),
        data=reminder["data"],
        schedule_version=reminder["schedule_version"],
    )
    customer = CustomerView(
        id=reminder["customer_id"],
        email=reminder["email"],
        webhook_url=None,
        time_zone=reminder["time_zone"],
        opted_out_channels=frozenset(),
        unsubscribed_at=None,
    )
    message = renderer.render(view, customer, CHANNEL)
    return email_bytes(message, idempotency_key=key, sender=SENDER, now=datetime.now(UTC))


def write_atomically(path: Path, content: bytes) -> None:
    """Temporary file, fsync, rename: what the service's outbox does with its default
    REMINDERS_OUTBOX_FSYNC=true, so a crash never leaves half an email."""
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
