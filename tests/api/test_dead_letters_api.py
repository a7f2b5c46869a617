"""The operator API: find a dead letter, see why it failed, dry-run and redrive it."""

from datetime import timedelta

from app.db.ledger.repo import claim_send
from app.domain.ledger import LedgerKey
from tests.support.dead_letters import (
    ADMIN,
    admin_get,
    admin_post,
    exhaust,
    fail_permanently,
    publish_reminder,
)
from tests.support.flow import API, get_reminder, push, push_message, put_customer, put_reminder
from tests.support.push import envelope


async def test_operator_api_requires_the_admin_token(client):
    """The reminders API token is not an admin credential."""
    assert (await client.get("/v1/dead-letters")).status_code == 401
    response = await client.get("/v1/dead-letters", headers=API)
    assert response.status_code == 401
    assert (await client.get("/v1/dead-letters", headers=ADMIN)).status_code == 200


async def test_dead_letter_is_listed_with_why_and_since_when(client, clock, publisher, provider):
    """An exhausted send appears with its error class, attempts, age and send state."""
    await exhaust(client, publisher, clock, provider, "r:dead")
    clock.advance(minutes=30)
    page = await admin_get(client, "/v1/dead-letters")
    [item] = page["items"]
    assert item["reminder_id"] == "r:dead"
    assert item["reason"] == "attempts_exhausted"
    assert item["error_class"] == "smtp_4xx"
    assert item["attempts"] == 3
    assert item["send_state"] == "dead"
    assert item["age_seconds"] == 30 * 60
    assert page["next_cursor"] is None


async def test_dead_letter_filters_and_cursor_pagination(client, clock, publisher, provider):
    """Filters narrow the list; a cursor walks it page by page without repeats."""
    for name in ("r:a", "r:b", "r:c"):
        await exhaust(client, publisher, clock, provider, name)
    first = await admin_get(client, "/v1/dead-letters", limit=2)
    assert [i["reminder_id"] for i in first["items"]] == ["r:a", "r:b"]
    second = await admin_get(client, "/v1/dead-letters", limit=2, cursor=first["next_cursor"])
    assert [i["reminder_id"] for i in second["items"]] == ["r:c"]
    assert second["next_cursor"] is None
    assert (await admin_get(client, "/v1/dead-letters", error_class="timeout"))["items"] == []
    assert len((await admin_get(client, "/v1/dead-letters", channel="email"))["items"]) == 3
    newest = await admin_get(client, "/v1/dead-letters", newer_than="3h")
    assert [i["reminder_id"] for i in newest["items"]] == ["r:c"]
    oldest = await admin_get(client, "/v1/dead-letters", older_than="5h")
    assert [i["reminder_id"] for i in oldest["items"]] == ["r:a"]
    bad = await client.get("/v1/dead-letters", params={"older_than": "soon"}, headers=ADMIN)
    assert bad.status_code == 422


async def test_show_has_ledger_history_and_a_redrive_preview(client, clock, publisher, provider):
    """Show returns the send record, the dead letters it produced and what a redrive does."""
    await exhaust(client, publisher, clock, provider, "r:show")
    [item] = (await admin_get(client, "/v1/dead-letters"))["items"]
    shown = await admin_get(client, f"/v1/dead-letters/{item['id']}")
    assert shown["send_record"]["state"] == "dead"
    assert shown["send_record"]["attempt_count"] == 3
    assert [h["id"] for h in shown["history"]] == [item["id"]]
    assert shown["reminder"]["id"] == "r:show"
    assert shown["redrive"]["action"] == "publish"
    assert shown["redrive"]["message"]["idempotency_key"] == "r:show:email:v1:r1"
    missing = await client.get("/v1/dead-letters/999999", headers=ADMIN)
    assert missing.status_code == 404


async def test_dry_run_reports_exactly_what_redrive_then_publishes(
    client, clock, publisher, provider
):
    """The dry run changes nothing; the redrive publishes the message the dry run named."""
    await exhaust(client, publisher, clock, provider, "r:redrive")
    [item] = (await admin_get(client, "/v1/dead-letters"))["items"]
    path = f"/v1/dead-letters/{item['id']}/redrive"

    preview = await admin_post(client, path, dry_run="true")
    assert preview["dry_run"] is True and preview["published"] == 1
    assert publisher.messages == []
    assert (await get_reminder(client, "r:redrive"))["send_records"][0]["state"] == "dead"

    done = await admin_post(client, path)
    [message] = publisher.drain()
    [planned], [made] = preview["items"], done["items"]
    assert planned["message"] == made["message"]
    assert message.idempotency_key == planned["message"]["idempotency_key"]
    assert message.payload == planned["message"]["payload"]
    assert made["message_id"] == message.message_id

    [record] = (await get_reminder(client, "r:redrive"))["send_records"]
    assert record["state"] == "pending"
    assert record["redrive_count"] == 1
    assert record["attempt_count"] == 3  # old attempts kept for audit
    assert record["attempt_budget_start"] == 3

    answer = (await push_message(client, message)).json()
    assert answer["outcome"] == "sent"
    reminder = await get_reminder(client, "r:redrive")
    assert reminder["state"] == "done"
    assert reminder["send_records"][0]["state"] == "sent"
    assert reminder["send_records"][0]["attempt_count"] == 4
    assert (await admin_get(client, "/v1/dead-letters"))["items"] == []
    redriven = await admin_get(client, "/v1/dead-letters", status="redriven")
    assert redriven["items"][0]["redriven_at"] is not None


async def test_a_sent_record_is_never_redriven(client, clock, publisher, provider):
    """Once the redriven send is sent, redriving its dead letter again publishes nothing."""
    await exhaust(client, publisher, clock, provider, "r:once")
    [item] = (await admin_get(client, "/v1/dead-letters"))["items"]
    await admin_post(client, f"/v1/dead-letters/{item['id']}/redrive")
    [message] = publisher.drain()
    await push_message(client, message)
    again = await admin_post(client, f"/v1/dead-letters/{item['id']}/redrive")
    assert again["published"] == 0
    assert again["items"][0]["reason"].startswith("already sent")
    assert publisher.messages == []


async def test_redrive_a_second_time_while_pending_is_refused(client, clock, publisher, provider):
    """A dead letter already redriven whose send is pending is not published twice."""
    await exhaust(client, publisher, clock, provider, "r:twice")
    [item] = (await admin_get(client, "/v1/dead-letters"))["items"]
    await admin_post(client, f"/v1/dead-letters/{item['id']}/redrive")
    again = await admin_post(client, f"/v1/dead-letters/{item['id']}/redrive")
    assert again["published"] == 0
    assert "already redriven" in again["items"][0]["reason"]
    assert len(publisher.drain()) == 1


async def test_redrive_by_filter_selects_open_dead_letters_only(client, clock, publisher, provider):
    """A filtered redrive publishes one message per matching open dead letter, then none."""
    for name in ("r:f1", "r:f2"):
        await exhaust(client, publisher, clock, provider, name)
    body = {"error_class": "smtp_4xx", "dry_run": True}
    preview = await admin_post(client, "/v1/dead-letters/redrive", json=body)
    assert preview["published"] == 2 and publisher.messages == []
    done = await admin_post(client, "/v1/dead-letters/redrive", json={**body, "dry_run": False})
    assert sorted(m.idempotency_key for m in publisher.drain()) == [
        "r:f1:email:v1:r1",
        "r:f2:email:v1:r1",
    ]
    assert done["published"] == 2
    again = await admin_post(client, "/v1/dead-letters/redrive", json=body)
    assert again["items"] == []
    typo = await client.post("/v1/dead-letters/redrive", json={"eror_class": "x"}, headers=ADMIN)
    assert typo.status_code == 422


async def test_terminal_failure_is_listed_and_redrivable_after_a_fix(
    client, clock, publisher, provider
):
    """A permanent failure shows under state=terminal_failure and can be redriven."""
    await fail_permanently(client, publisher, clock, provider, "r:terminal")
    page = await admin_get(client, "/v1/sends", state="terminal_failure")
    [record] = page["items"]
    assert record["last_error_class"] == "smtp_5xx"
    report = await admin_post(client, f"/v1/sends/{record['id']}/redrive")
    assert report["published"] == 1
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"


async def test_stuck_sends_are_listed_past_their_lease(
    client, container, clock, publisher, provider
):
    """A send whose worker vanished shows up under stuck=true once its lease expired."""
    await publish_reminder(client, publisher, clock, "r:stuck")
    # Claim the row as a worker would, then let the lease run out with no finalize.
    key = LedgerKey("r:stuck", "email", provider.name)
    async with container.engine.begin() as conn:
        await claim_send(conn, key, now=clock.now, lease_until=clock.now + timedelta(minutes=1))
    assert (await admin_get(client, "/v1/sends", state="sending", stuck="true"))["items"] == []
    clock.advance(minutes=2)
    [stuck] = (await admin_get(client, "/v1/sends", state="sending", stuck="true"))["items"]
    assert stuck["reminder_id"] == "r:stuck"
    report = await admin_post(client, f"/v1/sends/{stuck['id']}/redrive")
    assert report["items"][0]["action"] == "publish"
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"


async def test_quarantined_unknown_reminder_is_redrivable_once_it_exists(
    client, clock, publisher, provider
):
    """A message for a reminder created later is published again once the reminder exists;
    a malformed one never is."""
    await push(client, envelope("r:later", message_id="m-early"))
    await push(client, {"message_id": "m-bad", "payload": {"v": 9}})
    items = (await admin_get(client, "/v1/dead-letters"))["items"]
    by_reason = {item["reason"]: item for item in items}
    assert set(by_reason) == {"unknown_reminder", "malformed"}
    bad = await admin_post(client, f"/v1/dead-letters/{by_reason['malformed']['id']}/redrive")
    assert bad["published"] == 0 and "malformed" in bad["items"][0]["reason"]
    early = by_reason["unknown_reminder"]["id"]
    assert (await admin_post(client, f"/v1/dead-letters/{early}/redrive"))["published"] == 0

    await put_customer(client, "cust_later")
    await put_reminder(client, "r:later", customer_id="cust_later", due_at=clock.now)
    report = await admin_post(client, f"/v1/dead-letters/{early}/redrive")
    assert report["published"] == 1
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"
