"""Every row of the push answer table, asserted on HTTP status, JSON body and the ledger row."""

import asyncio
import dataclasses
import math
import random
from datetime import timedelta

from app.adapters.channels.outbox import OutboxProvider
from app.domain.errors import PermanentProviderError, RateLimitedError, TransientProviderError
from app.domain.messages import SendResult
from tests.support.flow import (
    API,
    get_reminder,
    push,
    push_message,
    put_customer,
    put_reminder,
    sweep,
)
from tests.support.push import envelope
from tests.support.rows import dead_letter_rows, instant, send_record_rows


async def queued(client, clock, publisher, reminder_id="r1", *, channels=("email",), **fields):
    """Register customer c1 and a reminder due now, sweep, and return the published messages."""
    await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")
    await put_reminder(
        client, reminder_id, customer_id="c1", due_at=clock.now, channels=channels, **fields
    )
    assert (await sweep(client))["enqueued"] == 1
    return publisher.drain()


async def record_of(client, reminder_id="r1", channel="email"):
    """The reminder and its ledger row for one channel, read through the API."""
    reminder = await get_reminder(client, reminder_id)
    [row] = [r for r in reminder["send_records"] if r["channel"] == channel]
    return reminder, row


def first_jitter(ceiling: float) -> float:
    """The first delay the receiver's Random(1234) produces for this ceiling (floor 1 s)."""
    return max(1.0, random.Random(1234).random() * ceiling)


async def test_sent(client, clock, publisher, provider):
    """A due message is sent once: 200 sent, the row sent with the provider's request id."""
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json() == {
        "outcome": "sent",
        "ack": True,
        "reminder_id": "r1",
        "channel": "email",
        "attempt": 1,
    }
    reminder, row = await record_of(client)
    assert reminder["state"] == "done"
    assert row["state"] == "sent"
    assert row["outcome"] == "sent"
    assert row["attempt_count"] == 1
    assert row["provider"] == "scripted"
    assert row["provider_request_id"] == "req-1"
    assert row["idempotency_key"] == "r1:email:scripted"
    assert instant(row["sent_at"]) == clock.now
    assert row["lease_until"] is None
    [call] = provider.calls
    assert call.idempotency_key == "r1:email:scripted"
    assert call.message.recipient == "c1@example.com"
    assert call.timeout == 20


async def test_duplicate_after_sent_makes_no_provider_call(client, clock, publisher, provider):
    """Redeliveries after sent — at once and more than 5 minutes later — are acked duplicates."""
    [message] = await queued(client, clock, publisher)
    await push_message(client, message)
    _, before = await record_of(client)
    for minutes in (0, 6, 60 * 24):
        clock.advance(minutes=minutes)
        response = await push_message(client, message)
        assert response.status_code == 200
        assert response.json()["outcome"] == "duplicate"
        assert response.json()["ack"] is True
    assert len(provider.calls) == 1
    _, after = await record_of(client)
    assert after == before


async def test_duplicate_under_a_new_message_id_is_still_a_duplicate(
    client, clock, publisher, provider
):
    """The ledger deduplicates by (reminder, channel, provider), not by the queue's message id."""
    [message] = await queued(client, clock, publisher)
    await push_message(client, message)
    clock.advance(minutes=10)
    response = await push(client, {"message_id": "another-id", "payload": message.payload})
    assert response.json()["outcome"] == "duplicate"
    assert len(provider.calls) == 1


async def test_suppressed_when_opted_out_of_the_channel(client, clock, publisher, provider):
    """A customer who opted out of email after the message was queued gets nothing."""
    [message] = await queued(client, clock, publisher)
    await put_customer(client, "c1", opted_out_channels=["email"])
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json()["outcome"] == "suppressed"
    assert response.json()["ack"] is True
    reminder, row = await record_of(client)
    assert (row["state"], row["outcome"]) == ("terminal_failure", "suppressed")
    assert reminder["state"] == "done"
    assert provider.calls == []


async def test_suppressed_when_globally_unsubscribed(client, clock, publisher, provider):
    """An unsubscribed customer gets nothing on any channel."""
    messages = await queued(client, clock, publisher, channels=("email", "webhook"))
    await put_customer(client, "c1", unsubscribed=True)
    for message in messages:
        response = await push_message(client, message)
        assert (response.status_code, response.json()["outcome"]) == (200, "suppressed")
    reminder = await get_reminder(client, "r1")
    assert {(r["channel"], r["state"], r["outcome"]) for r in reminder["send_records"]} == {
        ("email", "terminal_failure", "suppressed"),
        ("webhook", "terminal_failure", "suppressed"),
    }
    assert reminder["state"] == "done"
    assert provider.calls == []


async def test_cancelled(client, clock, publisher, provider):
    """A message of a reminder cancelled after it was queued is dropped and acked."""
    [message] = await queued(client, clock, publisher)
    assert (await client.delete("/v1/reminders/r1", headers=API)).status_code == 200
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json()["outcome"] == "cancelled"
    reminder, row = await record_of(client)
    assert (row["state"], row["outcome"]) == ("terminal_failure", "cancelled")
    assert reminder["state"] == "cancelled"
    assert provider.calls == []


async def test_stale_after_due_at_change(client, clock, publisher, provider):
    """An old-version message after a reschedule is stale: acked, unsent, row left claimable."""
    [old] = await queued(client, clock, publisher)
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now + timedelta(minutes=1))
    response = await push_message(client, old)
    assert response.status_code == 200
    assert response.json()["outcome"] == "stale"
    reminder, row = await record_of(client)
    assert reminder["schedule_version"] == 2
    assert reminder["state"] == "scheduled"
    assert row["state"] == "pending"
    assert row["lease_until"] is None
    assert provider.calls == []
    # The new plan is published and sent normally.
    clock.advance(minutes=1)
    await sweep(client)
    [new] = publisher.drain()
    assert new.payload["schedule_version"] == 2
    assert (await push_message(client, new)).json()["outcome"] == "sent"
    assert len(provider.calls) == 1


async def test_expired_after_due_at_plus_grace(client, clock, publisher, provider):
    """A message arriving after due_at + grace (24 h) is dropped as expired."""
    [message] = await queued(client, clock, publisher)
    clock.advance(hours=24, seconds=1)
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json()["outcome"] == "expired"
    reminder, row = await record_of(client)
    assert (row["state"], row["outcome"]) == ("terminal_failure", "expired")
    assert reminder["state"] == "done"
    assert provider.calls == []


async def test_expired_after_expires_at(client, clock, publisher, provider):
    """Past the reminder's own expires_at the send is dropped, well inside the grace."""
    expires_at = (clock.now + timedelta(hours=1)).isoformat()
    [message] = await queued(client, clock, publisher, expires_at=expires_at)
    clock.advance(hours=1, seconds=1)
    response = await push_message(client, message)
    assert (response.status_code, response.json()["outcome"]) == (200, "expired")
    _, row = await record_of(client)
    assert (row["state"], row["outcome"]) == ("terminal_failure", "expired")
    assert provider.calls == []


async def test_just_before_expires_at_is_still_sent(client, clock, publisher, provider):
    """At exactly expires_at the reminder is still useful."""
    expires_at = (clock.now + timedelta(hours=1)).isoformat()
    [message] = await queued(client, clock, publisher, expires_at=expires_at)
    clock.advance(hours=1)
    assert (await push_message(client, message)).json()["outcome"] == "sent"


async def test_terminal_on_permanent_provider_error(client, clock, publisher, provider):
    """A permanent provider error is terminal_failure; redelivery makes no provider call."""
    provider.script = [PermanentProviderError("mailbox unknown", detail_class="invalid_address")]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json()["outcome"] == "terminal"
    assert response.json()["ack"] is True
    reminder, row = await record_of(client)
    assert row["state"] == "terminal_failure"
    assert row["outcome"] == "terminal"
    assert row["last_error_class"] == "invalid_address"
    assert row["last_error"] == "mailbox unknown"
    assert reminder["state"] == "done"
    clock.advance(minutes=10)
    again = await push_message(client, message)
    assert (again.status_code, again.json()["outcome"]) == (200, "terminal")
    assert len(provider.calls) == 1


async def test_retry_on_transient_error_with_seeded_jitter(client, clock, publisher, provider):
    """503 + Retry-After; next_attempt_at is now + the seeded jitter within [1 s, 10 s]."""
    provider.script = [TransientProviderError("connection reset", detail_class="connect")]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    delay = first_jitter(ceiling=10)
    assert 1.0 <= delay <= 10.0
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(math.ceil(delay))
    body = response.json()
    assert body["outcome"] == "retry"
    assert body["ack"] is False
    assert body["retry_after"] == math.ceil(delay)
    assert body["detail"] == "connect"
    reminder, row = await record_of(client)
    assert row["state"] == "pending"
    assert instant(row["next_attempt_at"]) == clock.now + timedelta(seconds=delay)
    assert row["last_error_class"] == "connect"
    assert row["lease_until"] is None
    assert row["attempt_count"] == 1
    assert reminder["state"] == "enqueued"


async def test_retry_is_sent_once_the_wait_is_over(client, clock, publisher, provider):
    """After next_attempt_at the redelivery claims again (attempt 2) and sends."""
    provider.script = [TransientProviderError("timeout")]
    [message] = await queued(client, clock, publisher)
    first = await push_message(client, message)
    clock.advance(seconds=int(first.headers["Retry-After"]))
    second = await push_message(client, message)
    assert (second.status_code, second.json()["outcome"], second.json()["attempt"]) == (
        200,
        "sent",
        2,
    )
    _, row = await record_of(client)
    assert (row["state"], row["attempt_count"], row["next_attempt_at"]) == ("sent", 2, None)
    assert len(provider.calls) == 2
    assert {c.idempotency_key for c in provider.calls} == {"r1:email:scripted"}


async def test_retry_on_rate_limit_waits_at_least_the_provider_retry_after(
    client, clock, publisher, provider
):
    """RateLimitedError(retry_after=120): Retry-After ≥ 120 and next_attempt_at 120 s on."""
    provider.script = [RateLimitedError("slow down", retry_after=120)]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert response.status_code == 503
    assert int(response.headers["Retry-After"]) >= 120
    assert response.json()["outcome"] == "retry"
    _, row = await record_of(client)
    assert row["state"] == "pending"
    assert row["last_error_class"] == "rate_limited"
    assert instant(row["next_attempt_at"]) == clock.now + timedelta(seconds=120)


async def test_an_absurd_provider_retry_after_is_capped_at_a_day(
    client, clock, publisher, provider
):
    """A hostile or broken Retry-After (1e14 s) is read as a day, not a 500 from an
    overflowing datetime, and the send is retried then."""
    provider.script = [RateLimitedError("slow down", retry_after=1e14)]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "86400"
    _, row = await record_of(client)
    assert row["state"] == "pending"
    assert instant(row["next_attempt_at"]) == clock.now + timedelta(days=1)


async def test_unclassified_provider_exception_is_retried(client, clock, publisher, provider):
    """A provider bug (any other exception) is treated as transient: retried, not lost."""
    provider.script = [ValueError("provider bug")]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert (response.status_code, response.json()["outcome"]) == (503, "retry")
    _, row = await record_of(client)
    assert (row["state"], row["last_error_class"]) == ("pending", "unclassified")


async def test_dead_lettered_after_max_attempts(client, clock, container, publisher, provider):
    """Three transient failures (max_attempts 3): dead, one dead_letters row, acked."""
    provider.script = [TransientProviderError(f"boom {n}") for n in range(1, 4)]
    [message] = await queued(client, clock, publisher)
    for _ in range(2):
        response = await push_message(client, message)
        assert (response.status_code, response.json()["outcome"]) == (503, "retry")
        clock.advance(seconds=int(response.headers["Retry-After"]))
    response = await push_message(client, message)
    assert response.status_code == 200
    assert response.json()["outcome"] == "dead_lettered"
    assert response.json()["ack"] is True
    reminder, row = await record_of(client)
    assert (row["state"], row["outcome"], row["attempt_count"]) == ("dead", "dead_lettered", 3)
    assert row["last_error"] == "boom 3"
    assert reminder["state"] == "done"
    [dead] = await dead_letter_rows(container.engine)
    assert dead["reason"] == "attempts_exhausted"
    assert dead["send_record_id"] == row["id"]
    assert (dead["reminder_id"], dead["channel"], dead["attempts"]) == ("r1", "email", 3)
    assert dead["message_id"] == message.message_id
    assert dead["payload"] == message.payload
    # A redelivery is acked without another call or another dead letter.
    again = await push_message(client, message)
    assert (again.status_code, again.json()["outcome"]) == (200, "dead_lettered")
    assert len(provider.calls) == 3
    assert len(await dead_letter_rows(container.engine)) == 1


async def test_rejected_malformed_payload_is_quarantined(client, container, provider):
    """An authentic message with a bad payload version is acked and kept in dead_letters."""
    body = envelope("r1", message_id="m-bad")
    body["payload"]["v"] = 2
    response = await push(client, body)
    assert response.status_code == 200
    assert response.json()["outcome"] == "rejected"
    assert response.json()["ack"] is True
    assert "version" in response.json()["detail"]
    [dead] = await dead_letter_rows(container.engine)
    assert (dead["reason"], dead["message_id"], dead["queue"]) == (
        "malformed",
        "m-bad",
        "reminders",
    )
    assert dead["payload"] == body["payload"]
    assert await send_record_rows(container.engine) == []
    assert provider.calls == []


async def test_rejected_unknown_reminder_is_quarantined(client, container, provider):
    """A well-formed message naming no known reminder is acked and kept in dead_letters."""
    response = await push(client, envelope("no-such-reminder", message_id="m-unknown"))
    assert response.status_code == 200
    assert response.json()["outcome"] == "rejected"
    [dead] = await dead_letter_rows(container.engine)
    assert dead["reason"] == "unknown_reminder"
    assert (dead["reminder_id"], dead["message_id"]) == ("no-such-reminder", "m-unknown")
    assert await send_record_rows(container.engine) == []
    assert provider.calls == []
    again = await push(client, envelope("no-such-reminder", message_id="m-unknown"))
    assert again.json()["outcome"] == "rejected"
    assert len(await dead_letter_rows(container.engine)) == 1


async def test_busy_while_the_lease_is_live(client, clock, publisher, provider):
    """A redelivery during a send in progress: 503 with Retry-After = the lease's remainder."""
    [message] = await queued(client, clock, publisher)
    provider.gate = asyncio.Event()
    first = asyncio.create_task(push_message(client, message))
    await provider.entered.wait()
    clock.advance(seconds=15)
    response = await push_message(client, message)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "45"
    body = response.json()
    assert (body["outcome"], body["ack"], body["retry_after"], body["attempt"]) == (
        "busy",
        False,
        45,
        1,
    )
    _, row = await record_of(client)
    assert row["state"] == "sending"
    assert instant(row["lease_until"]) == clock.now + timedelta(seconds=45)
    provider.gate.set()
    assert (await first).json()["outcome"] == "sent"
    assert len(provider.calls) == 1


async def test_busy_on_early_redelivery_of_a_retry(client, clock, publisher, provider):
    """A redelivery before next_attempt_at is nacked with the remaining wait, no call."""
    provider.script = [RateLimitedError(retry_after=100)]
    [message] = await queued(client, clock, publisher)
    await push_message(client, message)
    clock.advance(seconds=30)
    response = await push_message(client, message)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "70"
    assert response.json()["outcome"] == "busy"
    assert response.json()["detail"] == "retry not due"
    _, row = await record_of(client)
    assert (row["state"], row["attempt_count"]) == ("pending", 1)
    assert len(provider.calls) == 1


async def test_reminder_is_done_only_when_every_channel_is_final(
    client, clock, publisher, provider
):
    """With email sent and the webhook retrying, the reminder stays enqueued until both finish."""
    provider.script = [SendResult("email-1"), TransientProviderError("503 from hook")]
    email, webhook = await queued(client, clock, publisher, channels=("email", "webhook"))
    assert (await push_message(client, email)).json()["outcome"] == "sent"
    retry = await push_message(client, webhook)
    assert retry.json()["outcome"] == "retry"
    assert (await get_reminder(client, "r1"))["state"] == "enqueued"
    clock.advance(seconds=int(retry.headers["Retry-After"]))
    assert (await push_message(client, webhook)).json()["outcome"] == "sent"
    assert (await get_reminder(client, "r1"))["state"] == "done"
    assert provider.calls[2].message.recipient == "https://hooks.example.com/c1"


async def test_real_outbox_provider_end_to_end(client, clock, container, publisher, tmp_path):
    """With the real outbox provider: the email file is written once, and a customer whose
    webhook URL was removed after registration makes the webhook send terminal (no
    recipient) instead of retrying."""
    outbox = OutboxProvider(tmp_path / "real-outbox", fsync=False)
    container.receiver = dataclasses.replace(
        container.receiver, providers={"email": outbox, "webhook": outbox}
    )
    await put_customer(client, "c2", webhook_url="https://hooks.example.com/c2")
    await put_reminder(
        client, "r2", customer_id="c2", due_at=clock.now, channels=("email", "webhook")
    )
    await put_customer(client, "c2")  # the application drops the URL: registration was fine
    await sweep(client)
    answers = {}
    for message in publisher.drain():
        answers[message.payload["channel"]] = (await push_message(client, message)).json()
        clock.advance(minutes=10)
        assert (await push_message(client, message)).json()["outcome"] in {"duplicate", "terminal"}
    assert answers["email"]["outcome"] == "sent"
    assert answers["webhook"]["outcome"] == "terminal"
    reminder = await get_reminder(client, "r2")
    records = {r["channel"]: r for r in reminder["send_records"]}
    assert records["webhook"]["last_error_class"] == "no_recipient"
    written = tmp_path / "real-outbox" / records["email"]["provider_request_id"]
    assert written.is_file()
    assert [p.name for p in (tmp_path / "real-outbox" / "email").iterdir()] == [written.name]
    assert reminder["state"] == "done"


async def test_an_over_long_provider_request_id_still_finalizes_as_sent(
    client, clock, publisher, provider
):
    """A provider id longer than the column is cut, so the accepted send is recorded once
    instead of failing the finalize and being sent again after the lease."""
    provider.script = [SendResult("x" * 1000)]
    [message] = await queued(client, clock, publisher)
    response = await push_message(client, message)
    assert response.json()["outcome"] == "sent"
    _, row = await record_of(client)
    assert row["state"] == "sent"
    assert row["provider_request_id"] == "x" * 255
    clock.advance(minutes=2)
    assert (await push_message(client, message)).json()["outcome"] == "duplicate"
    assert len(provider.calls) == 1
