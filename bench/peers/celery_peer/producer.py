"""The producer, run as a team runs it from cron: due reminders → one Celery task each.

Usage: ``python -m bench.peers.celery_peer.producer`` (environment as ``tasks.py``; run from
the repository root). Takes the due reminders in batches (``FOR UPDATE SKIP LOCKED``, so two
overlapping cron runs never take the same rows), marks them ``enqueued``, publishes one task
per reminder carrying what the email needs (no read per task), then commits: a crash before
the commit leaves the batch ``scheduled`` for the next run, and the ledger's claim absorbs
the tasks published twice. Prints how many it published.
"""

from __future__ import annotations

import os
import sys
import time

import psycopg

from .app import app
from .tasks import send_reminder

BATCH = 1000  # rows per transaction: a short lock, few round trips

TAKE_DUE = """WITH due AS (
    SELECT id FROM reminders WHERE state = 'scheduled' AND due_at <= now()
    ORDER BY due_at LIMIT %s FOR UPDATE SKIP LOCKED)
UPDATE reminders r SET state = 'enqueued', enqueued_at = now(), updated_at = now()
FROM due, customers c WHERE r.id = due.id AND c.id = r.customer_id
RETURNING r.id, r.customer_id, r.kind, r.due_at, r.data, r.schedule_version,
    c.email, c.time_zone, c.unsubscribed_at"""


def publish_due(conn: psycopg.Connection) -> int:
    """Enqueue every due reminder; how many tasks were published."""
    published = 0
    # One broker connection for the whole run instead of one per apply_async.
    with app.producer_or_acquire() as producer:
        while rows := conn.execute(TAKE_DUE, (BATCH,)).fetchall():
            for row in rows:
                if row[8] is not None:
                    continue  # unsubscribed: taken off the schedule, nothing sent
                send_reminder.apply_async((payload(row),), producer=producer)
                published += 1
            conn.commit()
    return published


def payload(row: tuple) -> dict:
    """The task's argument: JSON, what rendering the email needs."""
    rid, customer_id, kind, due_at, data, version, email, time_zone, _ = row
    return {
        "id": rid,
        "customer_id": customer_id,
        "kind": kind,
        "due_at": due_at.isoformat(),
        "data": data,
        "schedule_version": version,
        "email": email,
        "time_zone": time_zone,
    }


def main() -> None:
    started = time.perf_counter()
    with psycopg.connect(os.environ["PEER_DATABASE_URL"]) as conn:
        published = publish_due(conn)
    print(f"published {published} in {time.perf_counter() - started:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
