"""One reading of the ledger for every process: the first to take the shared row's lease
reads, the others adopt what it published (``app/services/ledger_metrics.py``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from app.db import ledger_readings_repo
from app.services.audit import AuditReport
from app.services.deliverability import DeliverabilityFigures
from app.services.ledger_metrics import FIRST_READING_POLL_SECONDS, LedgerMetrics
from app.services.ledger_snapshot import LedgerSnapshot
from app.services.operations import LedgerFigures
from tests.support.flow import scrape
from tests.support.ledger_states import add_dead_letter

pytestmark = pytest.mark.anyio


def another_process(container, **overrides) -> LedgerMetrics:
    """A second process's reader: same database and clock, its own lease token."""
    settings = {
        "clock": container.clock,
        "interval_seconds": container.ledger_metrics.interval_seconds,
        "timeout_seconds": container.ledger_metrics.timeout_seconds,
    }
    return LedgerMetrics(container.engine, **(settings | overrides))


def count_readings(metrics: LedgerMetrics) -> list[int]:
    """How many times ``metrics`` read the ledger itself, kept in a one-item list."""
    readings, real_refresh = [0], metrics.refresh

    async def counted_refresh():
        readings[0] += 1
        return await real_refresh()

    metrics.refresh = counted_refresh  # type: ignore[method-assign]
    return readings


async def test_one_process_reads_and_the_other_serves_its_figures(client, container):
    """Process A reads the ledger (one dead letter in it); process B, the app's, reads
    nothing and its /metrics shows A's figures and audit."""
    await add_dead_letter(container.engine, "m-1")
    first, second = another_process(container), container.ledger_metrics
    first_reads, second_reads = count_readings(first), count_readings(second)
    await first.turn()
    await second.turn()
    assert (first_reads, second_reads) == ([1], [0])
    assert second.snapshot == first.snapshot
    text = await scrape(client, refresh=False)
    assert "reminders_ledger_up 1.0" in text
    assert 'reminders_dead_letters{reason="attempts_exhausted"} 1.0' in text
    assert 'reminders_audit_violations{invariant="sent_twice"} 0.0' in text


async def test_a_slow_reading_spaces_out_the_next_for_every_process(container, clock):
    """A reading that took 10 s puts the next 190 s later for every process (readings
    take at most 5% of the time): B does not read 100 s later, and does at 191 s."""
    first, second = another_process(container), container.ledger_metrics
    ticks = iter(range(0, 10**6, 10))
    first.monotonic = lambda: float(next(ticks))  # every look at the clock: 10 s later
    second_reads = count_readings(second)
    await first.turn()
    clock.advance(seconds=100)
    await second.turn()
    assert second_reads == [0] and second.snapshot == first.snapshot
    clock.advance(seconds=91)
    await second.turn()
    assert second_reads == [1]
    assert first.pause_after(10.0) == pytest.approx(190.0)
    assert first.pause_after(0.001) == first.interval_seconds  # a quick reading: the interval


async def test_a_frozen_reader_loses_its_lease_and_its_late_reading_is_refused(container, clock):
    """A takes the lease and freezes. B waits (no snapshot: it looks again in a second)
    while the lease holds, reads once it lapsed, and A's late publish leaves B's reading."""
    frozen, second = another_process(container), container.ledger_metrics
    second_reads = count_readings(second)
    async with container.engine.begin() as conn:
        lease_end = frozen._lease_end(clock())
        assert await ledger_readings_repo.claim(
            conn, reader=frozen.reader, now=clock(), lease_until=lease_end
        )
    assert await second.turn() == min(second.interval_seconds, FIRST_READING_POLL_SECONDS)
    assert second_reads == [0] and second.snapshot.taken_at is None
    clock.set(lease_end)
    assert await second.turn() == second.interval_seconds
    assert second_reads == [1]
    async with container.engine.begin() as conn:
        late = await ledger_readings_repo.publish(
            conn, reader=frozen.reader, taken_at=clock(), next_at=clock(), snapshot={}
        )
        stored = await ledger_readings_repo.last_reading(conn)
    assert late is False
    assert stored is not None and stored.snapshot == second.snapshot.to_stored()


async def test_two_processes_turning_at_once_read_once(container):
    """Both due at the same instant: the row's UPDATE lets one of them read."""
    first, second = another_process(container), another_process(container)
    reads = count_readings(first), count_readings(second)
    await asyncio.gather(first.turn(), second.turn())
    await asyncio.gather(first.turn(), second.turn())
    assert sorted(count[0] for count in reads) == [0, 1]


async def test_a_failed_reading_is_shared_and_the_database_back_restores_figures(
    container, clock, monkeypatch
):
    """A reading that fails says reminders_ledger_up 0 in every process; a process that
    could not reach the row shows 0 too, and adopts the last reading once it can."""
    from app.services import ledger_metrics

    first, second = another_process(container), container.ledger_metrics
    await first.turn()

    async def broken(*_args, **_kwargs):
        raise OSError("connection refused")

    monkeypatch.setattr(ledger_metrics.ledger_readings_repo, "claim", broken)
    await second.turn()
    assert second.snapshot.figures is None and second.snapshot.taken_at == clock()
    monkeypatch.undo()
    clock.advance(seconds=1)
    await second.turn()
    assert second.snapshot == first.snapshot and second.snapshot.figures is not None

    monkeypatch.setattr(ledger_metrics, "ledger_figures", broken)
    clock.advance(seconds=first.interval_seconds)
    await first.turn()
    await second.turn()
    assert first.snapshot.figures is None and second.snapshot == first.snapshot


def test_a_snapshot_comes_back_from_the_row_as_it_was():
    """Every field survives the row's JSON: tuples, None ages, the audit's instant."""
    taken = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)
    snapshot = LedgerSnapshot(
        figures=LedgerFigures(
            dead_letters=[("attempts_exhausted", 2, 61.5), ("malformed", 1, None)],
            stuck_sends=3,
            oldest_stuck_seconds=None,
            sweep_lag_seconds=4.25,
            queue_depth=[("reminders", "ready", 7)],
            broken_schedules=1,
            settled_24h={"sent": 5, "suppressed": 1},
        ),
        audit=AuditReport(taken, {"sent_twice": ["r1"], "lease_long_expired": []}),
        deliverability=DeliverabilityFigures({"hard_bounce": 2}, 40, {"complaint": 1}),
        taken_at=taken,
    )
    assert LedgerSnapshot.from_stored(snapshot.to_stored(), taken_at=taken) == snapshot
    empty = LedgerSnapshot(taken_at=taken)
    assert LedgerSnapshot.from_stored(empty.to_stored(), taken_at=taken) == empty
    no_queue = LedgerSnapshot(figures=LedgerFigures([], 0, None, 0.0, None, 0, {}), taken_at=taken)
    assert LedgerSnapshot.from_stored(no_queue.to_stored(), taken_at=taken) == no_queue
