"""A process that dies between a finalize's commit and its settle statement leaves the
reminder ``enqueued`` with every channel final. Its redelivery answers ``duplicate`` and
the catch-up has nothing to republish, so the sweep's catch-up settles it (the same rule
as the live settle and ``reminders audit --repair``)."""

import pytest
from sqlalchemy import update

from app.db.tables import reminders
from app.services.audit import run_audit
from tests.support.flow import deliver_all, get_reminder, put_customer, put_reminder, sweep

pytestmark = pytest.mark.anyio


async def test_a_reminder_left_open_after_its_last_finalize_is_settled_by_the_sweep(
    client, clock, publisher, container
):
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    await put_reminder(
        client, "r1", customer_id="c1", due_at=clock.now, channels=("email", "webhook")
    )
    await sweep(client)
    assert [a["outcome"] for a in await deliver_all(client, publisher)] == ["sent", "sent"]
    async with container.engine.begin() as conn:  # the settle that never ran
        await conn.execute(
            update(reminders).where(reminders.c.id == "r1").values(state="enqueued", done_at=None)
        )
    clock.advance(minutes=5)
    await sweep(client)
    assert (await get_reminder(client, "r1"))["state"] == "enqueued"  # within the margin
    clock.advance(minutes=30)
    report = await sweep(client)
    assert report["republished"] == 0  # nothing to send again
    assert (await get_reminder(client, "r1"))["state"] == "done"
    async with container.engine.connect() as conn:
        assert (await run_audit(conn, now=clock.now)).ok
