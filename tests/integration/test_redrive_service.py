"""The redrive service's failure paths: the queue refuses, or the row changed meanwhile."""

from collections.abc import Sequence

from app.db import redrive_repo
from app.domain.errors import PublishError
from app.domain.messages import OutgoingMessage
from app.domain.redrive import DeadLetterFilter
from app.services import dead_letters as service
from tests.support.dead_letters import exhaust
from tests.support.flow import get_reminder


class RefusingPublisher:
    """A queue that is down: every publish fails."""

    name = "refusing"
    max_delay_seconds = 3600.0

    async def publish(self, message: OutgoingMessage) -> str:
        raise PublishError("queue unavailable (HTTP 503)")

    async def publish_batch(self, messages: Sequence[OutgoingMessage]) -> list[str]:
        raise PublishError("queue unavailable (HTTP 503)")


def _ctx(container, publisher) -> service.RedriveContext:
    return service.RedriveContext(container.engine, publisher, container.queue_for, container.clock)


async def test_refused_publish_reopens_the_dead_letter_for_another_redrive(
    client, container, clock, publisher, provider
):
    """When the queue refuses, the dead letter is open again and the next redrive publishes."""
    await exhaust(client, publisher, clock, provider, "r:refused")
    failed = await service.redrive_dead_letters(
        _ctx(container, RefusingPublisher()), DeadLetterFilter(), dry_run=False
    )
    assert failed.error and failed.published == 0
    assert "redrive again" in failed.items[0].to_json()["reason"]
    [record] = (await get_reminder(client, "r:refused"))["send_records"]
    assert record["state"] == "pending" and record["redrive_count"] == 1

    clock.advance(seconds=1)
    retried = await service.redrive_dead_letters(
        _ctx(container, publisher), DeadLetterFilter(), dry_run=False
    )
    assert retried.published == 1
    [message] = publisher.drain()
    assert message.idempotency_key == "r:refused:email:v1:r2"


async def test_a_record_changed_after_planning_is_not_reset(
    client, container, clock, publisher, provider
):
    """The reset is a compare-and-set: a concurrent redrive wins once, the other skips."""
    await exhaust(client, publisher, clock, provider, "r:race")
    async with container.engine.connect() as conn:
        [row] = (await service.list_dead_letters(conn, DeadLetterFilter(), now=clock.now)).items
        snapshot = await redrive_repo.send_snapshot(conn, row["send_record_id"])
    assert snapshot is not None
    first = await service.redrive_dead_letter(_ctx(container, publisher), row["id"], dry_run=False)
    assert first.published == 1
    async with container.engine.begin() as conn:
        assert await redrive_repo.reset_sends_for_redrive(conn, [snapshot], now=clock.now) == set()
    assert len(publisher.drain()) == 1
