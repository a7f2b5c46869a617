"""The reminders API: idempotent upserts, rescheduling, cancel/revive, errors, auth, cron auth."""

from datetime import datetime, timedelta

import pytest

from app.domain.errors import PermanentProviderError, PublishError
from app.domain.messages import SendResult
from tests.support.dead_letters import admin_get, admin_post, exhaust
from tests.support.flow import (
    API,
    CRON,
    CRON_TOKEN,
    get_reminder,
    push_message,
    put_customer,
    put_reminder,
    sweep,
)
from tests.support.recording import RecordingPublisher

# Module-level anyio mark: parametrized async tests keep their parameters.
pytestmark = pytest.mark.anyio


def reminder_body(clock, **fields):
    """A valid reminder body for customer c1, due in one hour."""
    return {
        "customer_id": "c1",
        "kind": "weekly_digest",
        "due_at": (clock.now + timedelta(hours=1)).isoformat(),
        "channels": ["email"],
        **fields,
    }


@pytest.fixture
async def customer(client):
    """Customer c1 with an email address and a webhook URL."""
    return await put_customer(client, "c1", webhook_url="https://hooks.example.com/c1")


async def test_create_then_same_body_is_idempotent(client, clock, customer):
    """PUT creates (201); the same body again gives 200 and the same reminder, version 1."""
    body = reminder_body(clock, data={"week": 33})
    created = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert created.status_code == 201
    assert created.json()["schedule_version"] == 1
    assert created.json()["state"] == "scheduled"
    clock.advance(minutes=5)
    again = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert again.status_code == 200
    assert again.json() == created.json()


async def test_equal_instant_in_another_offset_is_not_a_change(client, clock, customer):
    """The same due instant written with another UTC offset does not bump the version."""
    due = clock.now + timedelta(hours=1)
    await client.put("/v1/reminders/r1", json=reminder_body(clock), headers=API)
    shifted = due.astimezone(datetime.fromisoformat("2026-01-01T00:00:00+05:30").tzinfo)
    body = reminder_body(clock, due_at=shifted.isoformat())
    response = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert response.status_code == 200
    assert response.json()["schedule_version"] == 1


async def test_due_at_change_bumps_version_and_reschedules(client, clock, publisher, customer):
    """A new due_at after enqueueing: version 2, state back to scheduled, published again."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    assert (await get_reminder(client, "r1"))["state"] == "enqueued"
    later = clock.now + timedelta(hours=2)
    updated = await put_reminder(client, "r1", customer_id="c1", due_at=later)
    assert updated["schedule_version"] == 2
    assert updated["state"] == "scheduled"
    assert datetime.fromisoformat(updated["due_at"]) == later
    assert updated["enqueued_at"] is None
    publisher.drain()
    await sweep(client)
    [message] = publisher.drain()
    assert message.payload["schedule_version"] == 2
    assert message.idempotency_key == "r1:email:v2"
    assert message.delay_seconds == 7200


async def test_channel_change_bumps_version(client, clock, customer):
    """Changing channels is a new plan too."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    updated = await put_reminder(
        client, "r1", customer_id="c1", due_at=clock.now, channels=("email", "webhook")
    )
    assert updated["schedule_version"] == 2
    assert updated["channels"] == ["email", "webhook"]


async def test_data_change_keeps_the_version(client, clock, customer):
    """data/kind/expires_at changes apply at send time without a new plan."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now, data={"a": 1})
    updated = await put_reminder(client, "r1", customer_id="c1", due_at=clock.now, data={"a": 2})
    assert updated["schedule_version"] == 1
    assert updated["data"] == {"a": 2}


async def test_put_on_a_done_reminder_is_a_conflict(client, clock, publisher, customer):
    """Changing a reminder that was already sent → 409; the same body is still 200."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    changed = reminder_body(clock, due_at=(clock.now + timedelta(days=1)).isoformat())
    response = await client.put("/v1/reminders/r1", json=changed, headers=API)
    assert response.status_code == 409
    assert response.json()["error"] == "conflict"
    same = reminder_body(clock, due_at=clock.now.isoformat())
    assert (await client.put("/v1/reminders/r1", json=same, headers=API)).status_code == 200
    assert (await get_reminder(client, "r1"))["state"] == "done"


async def test_delete_cancels_idempotently(client, clock, customer):
    """DELETE cancels; a second DELETE is the same answer."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    first = await client.delete("/v1/reminders/r1", headers=API)
    assert first.status_code == 200
    assert first.json()["state"] == "cancelled"
    assert first.json()["cancelled_at"] is not None
    clock.advance(minutes=1)
    second = await client.delete("/v1/reminders/r1", headers=API)
    assert second.status_code == 200
    assert second.json() == first.json()


async def test_cancelled_reminder_is_not_swept(client, clock, publisher, customer):
    """A cancelled reminder is never published."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await client.delete("/v1/reminders/r1", headers=API)
    assert (await sweep(client))["enqueued"] == 0
    assert publisher.messages == []


async def test_put_revives_a_cancelled_reminder_with_a_new_version(
    client, clock, publisher, provider, customer
):
    """PUT after DELETE revives: scheduled, version bumped, swept and sent under the new version."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    [old] = publisher.drain()
    await client.delete("/v1/reminders/r1", headers=API)
    assert (await push_message(client, old)).json()["outcome"] == "cancelled"
    revived = await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    assert (revived["state"], revived["schedule_version"]) == ("scheduled", 2)
    assert revived["cancelled_at"] is None
    await sweep(client)
    [new] = publisher.drain()
    assert (await push_message(client, new)).json()["outcome"] == "sent"
    assert len(provider.calls) == 1


async def test_delete_on_a_done_reminder_is_a_conflict(client, clock, publisher, customer):
    """A reminder that was already delivered cannot be cancelled."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    await sweep(client)
    await push_message(client, publisher.drain()[0])
    assert (await client.delete("/v1/reminders/r1", headers=API)).status_code == 409


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/reminders/nope"),
        ("DELETE", "/v1/reminders/nope"),
        ("GET", "/v1/customers/nope"),
    ],
)
async def test_unknown_ids_are_404(client, method, path):
    """Unknown reminder and customer ids → 404 with an error body."""
    response = await client.request(method, path, headers=API)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert "nope" in response.json()["message"]


async def test_get_reminder_shows_its_send_records(client, clock, publisher, customer):
    """GET returns the reminder with one ledger row per channel once delivered."""
    await put_reminder(
        client, "r1", customer_id="c1", due_at=clock.now, channels=("email", "webhook")
    )
    assert (await get_reminder(client, "r1"))["send_records"] == []
    await sweep(client)
    for message in publisher.drain():
        await push_message(client, message)
    records = (await get_reminder(client, "r1"))["send_records"]
    assert [(r["channel"], r["state"]) for r in records] == [("email", "sent"), ("webhook", "sent")]


def field_names(response) -> list[str]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_input"
    return [item["field"] for item in body["fields"]]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"due_at": "2026-08-10T10:00:00"}, "due_at", id="naive-due-at"),
        pytest.param({"due_at": "next tuesday"}, "due_at", id="unparseable-due-at"),
        pytest.param({"expires_at": "2026-08-10T10:00:00"}, "expires_at", id="naive-expires-at"),
        pytest.param({"channels": []}, "channels", id="empty-channels"),
        pytest.param({"channels": ["sms"]}, "channels.0", id="unknown-channel"),
        pytest.param({"customer_id": "nobody"}, "customer_id", id="unknown-customer"),
        pytest.param({"kind": "no_such_template"}, "kind", id="unknown-kind"),
        pytest.param({"kind": "Bad Kind!"}, "kind", id="bad-kind-format"),
        pytest.param({"data": {"blob": "x" * 20_000}}, "data", id="oversized-data"),
        pytest.param({"surprise": 1}, "surprise", id="unknown-field"),
        pytest.param(
            {"expires_at": "2026-08-10T09:30:00+00:00"}, "expires_at", id="expires-before-due"
        ),
    ],
)
async def test_invalid_reminders_are_422_naming_the_field(client, clock, customer, change, field):
    """Each invalid input answers 422 whose body names the offending field."""
    body = reminder_body(clock, **change)
    response = await client.put("/v1/reminders/r1", json=body, headers=API)
    assert field in field_names(response)
    assert (await client.get("/v1/reminders/r1", headers=API)).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"time_zone": "Mars/Olympus_Mons"}, "time_zone", id="bad-time-zone"),
        pytest.param({"email": "not-an-address"}, "email", id="bad-email"),
        pytest.param({"webhook_url": "ftp://example.com/x"}, "webhook_url", id="bad-url"),
        pytest.param({"opted_out_channels": ["pigeon"]}, "opted_out_channels.0", id="bad-opt-out"),
    ],
)
async def test_invalid_customers_are_422_naming_the_field(client, body, field):
    """Customer validation names the field too."""
    response = await client.put("/v1/customers/c9", json=body, headers=API)
    assert field in field_names(response)


async def test_bad_resource_id_is_422(client, clock, customer):
    """An id outside the allowed alphabet is refused before anything is stored."""
    response = await client.put("/v1/reminders/bad%20id", json=reminder_body(clock), headers=API)
    assert response.status_code == 422


async def test_customer_round_trip_and_unsubscribe(client, clock):
    """PUT/GET customer; unsubscribing records when, and keeps the first instant."""
    await put_customer(client, "c1", time_zone="Europe/Berlin")
    got = await client.get("/v1/customers/c1", headers=API)
    assert got.status_code == 200
    assert (got.json()["email"], got.json()["time_zone"]) == ("c1@example.com", "Europe/Berlin")
    assert got.json()["unsubscribed"] is False
    first = await put_customer(client, "c1", unsubscribed=True)
    clock.advance(hours=1)
    second = await put_customer(client, "c1", unsubscribed=True)
    assert first["unsubscribed"] is True
    assert second["unsubscribed_at"] == first["unsubscribed_at"]


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "Bearer wrong-token"}, id="wrong"),
        pytest.param({"Authorization": "Basic dGVzdC1hcGktdG9rZW4="}, id="basic-scheme"),
        pytest.param({"Authorization": f"Bearer {CRON_TOKEN}"}, id="cron-token"),
        pytest.param({"Authorization": "Bearer "}, id="empty"),
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/v1/reminders/r1"), ("GET", "/v1/reminders/r1"), ("DELETE", "/v1/reminders/r1"),
     ("PUT", "/v1/customers/c1"), ("GET", "/v1/customers/c1")],
)  # fmt: skip
async def test_reminders_api_requires_the_api_token(client, clock, method, path, headers):
    """Missing or wrong bearer (even another service's token) → 401 and nothing stored."""
    body = reminder_body(clock) if "reminders" in path else {"email": "c1@example.com"}
    kwargs = {"json": body} if method == "PUT" else {}
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert (await client.get("/v1/customers/c1", headers=API)).status_code == 404


@pytest.mark.parametrize(
    "request_kwargs",
    [
        pytest.param({"headers": CRON}, id="bearer"),
        pytest.param({"json": {"token": CRON_TOKEN}}, id="body-token"),
        pytest.param(
            {"json": {"payload": {"token": CRON_TOKEN}}},
            id="payload-token",
        ),
    ],
)
async def test_cron_accepts_bearer_or_token_in_the_body(
    client, clock, publisher, customer, request_kwargs
):
    """The cron token works as a bearer header, as {"token"} or as {"payload": {"token"}}."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    response = await client.post("/cron/sweep", **request_kwargs)
    assert response.status_code == 200
    report = response.json()
    assert (report["enqueued"], report["messages"], report["remaining"]) == (1, 1, 0)
    assert datetime.fromisoformat(report["horizon_end"]) == clock.now + timedelta(days=7)
    assert isinstance(report["duration_ms"], int)
    assert len(publisher.messages) == 1


@pytest.mark.parametrize(
    "request_kwargs",
    [
        pytest.param({}, id="nothing"),
        pytest.param({"headers": {"Authorization": "Bearer wrong"}}, id="wrong-bearer"),
        pytest.param({"headers": API}, id="api-token"),
        pytest.param({"json": {"token": "wrong"}}, id="wrong-body-token"),
        pytest.param({"json": {"payload": {"token": 12}}}, id="non-string-token"),
        pytest.param({"json": [CRON_TOKEN]}, id="array-body"),
        pytest.param({"content": b"{not json"}, id="garbage-body"),
    ],
)
async def test_cron_refuses_missing_or_wrong_tokens(
    client, clock, publisher, customer, request_kwargs
):
    """Without the cron token the sweep does not run: 401 and nothing published."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    response = await client.post("/cron/sweep", **request_kwargs)
    assert response.status_code == 401
    assert publisher.messages == []
    assert (await get_reminder(client, "r1"))["state"] == "scheduled"


async def test_cron_answers_502_when_the_queue_refuses(client, clock, container, customer):
    """A refused batch: 502 naming the error, and the reminder stays scheduled for next time."""
    refusing = RecordingPublisher(clock)

    async def refuse():
        raise PublishError("queue said no")

    refusing.before_batch = refuse
    container.publisher = refusing
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now)
    response = await client.post("/cron/sweep", headers=CRON)
    assert response.status_code == 502
    assert response.json()["error"] == "queue said no"
    assert (response.json()["enqueued"], response.json()["remaining"]) == (0, 1)
    assert (await get_reminder(client, "r1"))["state"] == "scheduled"


async def test_a_reminder_whose_only_send_was_dead_lettered_is_done_but_undelivered(
    client, clock, publisher, provider
):
    """Done says the reminder is finished, not that it arrived: the summary says undelivered,
    and per channel which one failed."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    reminder = await get_reminder(client, "r:dead")
    assert (reminder["state"], reminder["delivery"]) == ("done", "undelivered")
    assert reminder["delivery_by_channel"] == {"email": "undelivered"}


async def test_the_summary_names_the_delivered_and_the_failed_channels(
    client, clock, publisher, provider, customer
):
    """Email accepted and the webhook refused for good: partially delivered; a fully
    accepted reminder is delivered, an opted-out one withheld (not a failure)."""
    await put_reminder(client, "r1", customer_id="c1", due_at=clock.now, channels=("email",))
    await put_reminder(
        client, "r2", customer_id="c1", due_at=clock.now, channels=("email", "webhook")
    )
    await sweep(client)
    provider.script.extend([SendResult("req-1"), SendResult("req-2")])
    provider.script.append(PermanentProviderError("410 gone", detail_class="webhook_4xx"))
    for message in sorted(publisher.drain(), key=lambda m: m.idempotency_key):
        await push_message(client, message)
    assert (await get_reminder(client, "r1"))["delivery"] == "delivered"
    partial = await get_reminder(client, "r2")
    assert (partial["state"], partial["delivery"]) == ("done", "partially_delivered")
    assert partial["delivery_by_channel"] == {"email": "delivered", "webhook": "undelivered"}

    await put_customer(client, "c2", opted_out_channels=["email"])
    await put_reminder(client, "r3", customer_id="c2", due_at=clock.now)
    await sweep(client)
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "suppressed"
    withheld = await get_reminder(client, "r3")
    assert (withheld["state"], withheld["delivery"]) == ("done", "withheld")
    assert withheld["delivery_by_channel"] == {"email": "withheld"}


async def test_a_redrive_that_succeeds_turns_undelivered_into_delivered(
    client, clock, publisher, provider
):
    """Redriven, the reminder is open again (no summary) and settles delivered."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    [letter] = (await admin_get(client, "/v1/dead-letters"))["items"]
    await admin_post(client, f"/v1/dead-letters/{letter['id']}/redrive")
    reopened = await get_reminder(client, "r:dead")
    assert (reopened["state"], reopened["delivery"]) == ("enqueued", None)
    for message in publisher.drain():
        await push_message(client, message)
    redriven = await get_reminder(client, "r:dead")
    assert (redriven["state"], redriven["delivery"]) == ("done", "delivered")
