"""The sweep on a real database: delays, the 7-day edge, catch-up, batches, budget, crashes."""

import asyncio
from datetime import timedelta

import pytest

from app.db import reminders_repo
from app.db.engine import create_engine
from app.domain.errors import PublishError
from app.domain.queueing import MAX_DELAY_SECONDS as SEVEN_DAYS
from app.services import customers
from app.services import reminders as service
from app.services.customers import CustomerChange
from app.services.sweep import SweepLimits, messages_for, sweep
from tests.support.recording import RecordingPublisher

pytestmark = pytest.mark.anyio


@pytest.fixture
async def engine(clean_database_url):
    """An engine on the emptied test database."""
    built = create_engine(clean_database_url)
    yield built
    await built.dispose()


@pytest.fixture
def recorder(clock):
    return RecordingPublisher(clock)


async def add_customer(engine, clock, customer_id="c1"):
    """A customer through the same service the API uses."""
    change = CustomerChange(
        email=f"{customer_id}@example.com", webhook_url=f"https://hooks.example.com/{customer_id}"
    )
    async with engine.begin() as conn:
        await customers.put_customer(conn, customer_id, change, now=clock.now)


async def add_reminders(engine, clock, due: dict, *, channels=("email",), customer_id="c1"):
    """Reminders {id: due_at} through the service, in one transaction."""
    async with engine.begin() as conn:
        for reminder_id, due_at in due.items():
            values = {
                "customer_id": customer_id,
                "kind": "weekly_digest",
                "due_at": due_at,
                "expires_at": None,
                "channels": list(channels),
                "data": {},
            }
            await service.put_reminder(conn, reminder_id, values, now=clock.now)


async def state_of(engine, reminder_id):
    async with engine.connect() as conn:
        return await reminders_repo.get_reminder(conn, reminder_id)


def run(
    engine, publisher, clock, *, batch_size=500, budget=60.0, monotonic=None, claim=120.0, workers=2
):
    """One sweep with the given limits."""
    extra = {"monotonic": monotonic} if monotonic is not None else {}
    limits = SweepLimits(
        batch_size=batch_size, time_budget_seconds=budget, claim_seconds=claim, workers=workers
    )
    return sweep(engine, publisher, queue_for=queue_for, clock=clock, limits=limits, **extra)


def queue_for(channel):
    return f"q-{channel}"


async def test_one_message_per_channel_with_exact_delay_and_key(engine, clock, recorder):
    """Each (reminder, channel) gets one message: delay = due_at - now, key with the version."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"soon": clock.now + timedelta(seconds=90.5)})
    await add_reminders(
        engine, clock, {"both": clock.now + timedelta(hours=3)}, channels=("email", "webhook")
    )
    report = await run(engine, recorder, clock)
    assert (report.enqueued, report.messages, report.remaining) == (2, 3, 0)
    assert report.horizon_end == clock.now + timedelta(days=7)
    assert report.error is None
    got = {(m.payload["reminder_id"], m.payload["channel"]): m for m in recorder.requested}
    assert set(got) == {("soon", "email"), ("both", "email"), ("both", "webhook")}
    assert got[("soon", "email")].delay_seconds == 90.5
    assert got[("both", "webhook")].delay_seconds == 3 * 3600
    assert got[("both", "webhook")].queue == "q-webhook"
    assert got[("both", "webhook")].idempotency_key == "both:webhook:v1"
    assert got[("both", "webhook")].payload == {
        "v": 1,
        "reminder_id": "both",
        "channel": "webhook",
        "schedule_version": 1,
    }
    row = await state_of(engine, "both")
    assert row["state"] == "enqueued"
    assert row["enqueued_at"] == clock.now
    assert len(row["enqueued_message_ids"]) == 2
    assert row["sweep_claimed_until"] is None


async def test_seven_day_edge(engine, clock, recorder):
    """due_at = now + 7 d (and just inside) goes out with that exact delay; 7 d + 1 s waits."""
    await add_customer(engine, clock)
    await add_reminders(
        engine,
        clock,
        {
            "exactly": clock.now + timedelta(days=7),
            "inside": clock.now + timedelta(days=7) - timedelta(microseconds=1),
            "outside": clock.now + timedelta(days=7, seconds=1),
        },
    )
    report = await run(engine, recorder, clock)
    delays = {m.payload["reminder_id"]: m.delay_seconds for m in recorder.requested}
    assert delays == {"exactly": SEVEN_DAYS, "inside": SEVEN_DAYS - 0.000001}
    assert report.remaining == 0
    assert (await state_of(engine, "outside"))["state"] == "scheduled"
    assert (await run(engine, recorder, clock)).enqueued == 0
    clock.advance(seconds=1)
    assert (await run(engine, recorder, clock)).enqueued == 1
    assert recorder.requested[-1].payload["reminder_id"] == "outside"
    assert recorder.requested[-1].delay_seconds == SEVEN_DAYS


async def test_catch_up_after_a_long_pause(engine, clock, recorder):
    """After 30 days without a sweep every overdue row goes out at once, in several batches."""
    await add_customer(engine, clock)
    start = clock.now
    overdue = {f"r{n:03}": start + timedelta(hours=6 * n) for n in range(120)}  # 30 days
    upcoming = {"u1": start + timedelta(days=31), "u2": start + timedelta(days=36, hours=23)}
    beyond = {"far": start + timedelta(days=38)}
    await add_reminders(engine, clock, overdue | upcoming | beyond)
    clock.advance(days=30)
    report = await run(engine, recorder, clock, batch_size=25)
    assert report.enqueued == 122
    assert report.remaining == 0
    # Two sweep workers claim batches side by side (SKIP LOCKED): the last 22 rows may be
    # split between them, so the sizes are bounded, not fixed.
    assert sum(recorder.batches) == 122 and len(recorder.batches) >= 5
    assert max(recorder.batches) == 25
    assert recorder.publish_counts() == {(rid, "email"): 1 for rid in [*overdue, *upcoming]}
    delays = {m.payload["reminder_id"]: m.delay_seconds for m in recorder.requested}
    assert all(delays[rid] == 0 for rid in overdue)
    assert delays["u1"] == 86400
    assert delays["u2"] == 6 * 86400 + 23 * 3600
    assert (await state_of(engine, "far"))["state"] == "scheduled"
    # Due order: the oldest overdue rows are published first.
    assert [m.payload["reminder_id"] for m in recorder.requested[:3]] == ["r000", "r001", "r002"]


async def test_time_budget_stops_the_sweep_and_reports_what_is_left(engine, clock, recorder):
    """Each batch costs 25 s of the 60 s budget: three batches, then remaining reports the rest.
    One batch at a time: with two, which batch's publish moves the clock first decides
    whether a fourth starts (test_sweep_workers has two, on the embedded queue)."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {f"r{n:03}": clock.now for n in range(100)})
    elapsed = [1000.0]

    async def publishing_takes_25_seconds():
        elapsed[0] += 25

    recorder.before_batch = publishing_takes_25_seconds
    report = await run(
        engine, recorder, clock, batch_size=10, monotonic=lambda: elapsed[0], workers=1
    )
    assert report.enqueued == 30
    assert report.remaining == 70
    assert report.duration_ms == 75_000
    second = await run(
        engine, recorder, clock, batch_size=10, budget=840, monotonic=lambda: elapsed[0]
    )
    assert (second.enqueued, second.remaining) == (70, 0)
    assert sum(recorder.publish_counts().values()) == 100


async def test_only_scheduled_rows_are_published_once(engine, clock, recorder):
    """Enqueued, cancelled and done reminders are not published (again)."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"a": clock.now, "b": clock.now})
    async with engine.begin() as conn:
        await service.cancel_reminder(conn, "b", now=clock.now)
    assert (await run(engine, recorder, clock)).enqueued == 1
    # Within the catch-up margin: an enqueued message nobody delivered yet may just be late.
    clock.advance(minutes=20)
    assert (await run(engine, recorder, clock)).enqueued == 0
    assert recorder.publish_counts() == {("a", "email"): 1}


async def test_reschedule_while_publishing_is_not_lost(engine, clock, recorder):
    """A due_at change during a sweep's publish keeps the row scheduled; the next sweep sends v2."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"r1": clock.now})
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold():
        entered.set()
        await release.wait()

    recorder.before_batch = hold
    running = asyncio.create_task(run(engine, recorder, clock))
    await entered.wait()
    await add_reminders(engine, clock, {"r1": clock.now + timedelta(minutes=5)})
    release.set()
    assert (await running).enqueued == 1
    row = await state_of(engine, "r1")
    assert (row["state"], row["schedule_version"]) == ("scheduled", 2)
    recorder.before_batch = None
    assert (await run(engine, recorder, clock)).enqueued == 1
    assert [m.idempotency_key for m in recorder.requested] == ["r1:email:v1", "r1:email:v2"]
    assert recorder.requested[-1].delay_seconds == 300


async def test_refused_batch_is_released_for_the_next_sweep(engine, clock, recorder):
    """A queue refusal stops the sweep with an error; the rows are swept again at once."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"r1": clock.now, "r2": clock.now})

    async def refuse():
        raise PublishError("queue unavailable")

    recorder.before_batch = refuse
    report = await run(engine, recorder, clock)
    assert report.error == "queue unavailable"
    assert (report.enqueued, report.remaining) == (0, 2)
    assert (await state_of(engine, "r1"))["sweep_claimed_until"] is None
    recorder.before_batch = None
    assert (await run(engine, recorder, clock)).enqueued == 2


async def claim_rows(engine, clock):
    """What a sweep's first phase does: claim due rows for claim_seconds (120 s)."""
    async with engine.begin() as conn:
        return await reminders_repo.claim_due_reminders(
            conn,
            now=clock.now,
            horizon_end=clock.now + timedelta(days=7),
            claim_until=clock.now + timedelta(seconds=120),
            limit=10,
        )


async def test_crash_after_claim_is_swept_again_after_the_claim_expires(engine, clock, recorder):
    """A sweep that died after claiming holds the rows only for claim_seconds."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"r1": clock.now})
    assert [due.id for due in await claim_rows(engine, clock)] == ["r1"]
    assert (await run(engine, recorder, clock)).enqueued == 0
    clock.advance(seconds=119)
    assert (await run(engine, recorder, clock)).enqueued == 0
    clock.advance(seconds=1)
    assert (await run(engine, recorder, clock)).enqueued == 1
    assert recorder.publish_counts() == {("r1", "email"): 1}


async def test_crash_between_publish_and_mark_republishes_with_the_same_key(
    engine, clock, recorder
):
    """Published but never marked: the retry reuses the key, so the queue deduplicates it."""
    await add_customer(engine, clock)
    await add_reminders(engine, clock, {"r1": clock.now})
    [due] = await claim_rows(engine, clock)
    messages = messages_for(due, now=clock.now, max_delay=SEVEN_DAYS, queue_for=lambda c: f"q-{c}")
    first_ids = await recorder.inner.publish_batch(messages)  # ...and the process dies here
    clock.advance(seconds=120)
    assert (await run(engine, recorder, clock)).enqueued == 1
    assert [m.idempotency_key for m in recorder.requested] == ["r1:email:v1"]
    assert [m.message_id for m in recorder.inner.messages] == first_ids
    assert (await state_of(engine, "r1"))["enqueued_message_ids"] == first_ids


async def test_each_message_carries_its_customer_as_group(engine, clock, recorder):
    """The sweep publishes with the reminder's customer as the message group (SQS FIFO's
    MessageGroupId), read from the rows it claimed."""
    for customer in ("c1", "c2"):
        await add_customer(engine, clock, customer)
        await add_reminders(
            engine, clock, {f"r:{customer}": clock.now + timedelta(minutes=5)}, customer_id=customer
        )
    await run(engine, recorder, clock)
    groups = {m.payload["reminder_id"]: m.group for m in recorder.requested}
    assert groups == {"r:c1": "c1", "r:c2": "c2"}
