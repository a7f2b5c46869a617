"""``setup-infrai`` as a service against the fake Infrai: creates, then finds, idempotently."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from app.adapters.queues.infrai.settings import InfraiSettings
from app.adapters.queues.infrai.setup import apply_setup, plan_setup
from app.domain.errors import ConfigError
from tests.conftest import CRON_TOKEN, make_settings
from tests.support.fake_infrai import API_KEY
from tests.support.infrai_fixtures import make_api
from tests.support.push import PUSH_SECRET

pytestmark = pytest.mark.anyio

PUBLIC = "https://reminders.example.com"


def infrai_settings(fake, tmp_path, **infrai):
    """Settings of a deployment with one queue per channel, pointed at the fake."""
    values = {"base_url": fake.base_url, "api_key": SecretStr(API_KEY), **infrai}
    return make_settings(
        "sqlite+aiosqlite:///unused.db",
        tmp_path,
        public_base_url=PUBLIC,
        email_queue="reminders-email",
        webhook_queue="reminders-webhook",
        infrai=InfraiSettings(**values),
    )


async def run_setup(fake, settings, http, sleeps, *, push=True):
    api = make_api(http, fake.base_url, sleep=sleeps)
    steps = plan_setup(settings, push=push)
    return await apply_setup(api, steps, queue_list_path=settings.infrai.queue_list_path)


async def test_setup_creates_queues_dlqs_push_subscriptions_and_the_cron(
    fake_infrai, infrai_http, sleeps, tmp_path
):
    """Each channel queue gets its DLQ, max_retries above our ceiling, a push URL; one cron."""
    settings = infrai_settings(fake_infrai, tmp_path)
    results = await run_setup(fake_infrai, settings, infrai_http, sleeps)
    assert [(r.step.kind, r.step.target, r.status) for r in results] == [
        ("dlq", "reminders-email-dlq", "created"),
        ("queue", "reminders-email", "created"),
        ("dlq", "reminders-webhook-dlq", "created"),
        ("queue", "reminders-webhook", "created"),
        ("push", "reminders-email", "subscribed"),
        ("push", "reminders-webhook", "subscribed"),
        ("cron", "reminder-relay-sweep", "created"),
    ]
    email = fake_infrai.queues["reminders-email"]
    assert (email.dead_letter_queue, email.max_retries) == ("reminders-email-dlq", 20)
    assert email.max_retries > settings.max_attempts
    assert email.visibility_timeout_default == 120 > settings.lease_seconds
    assert fake_infrai.subscriptions["reminders-webhook"]["url"] == (
        f"{PUBLIC}/push/reminders-webhook"
    )
    assert fake_infrai.subscriptions["reminders-webhook"]["secret"] == PUSH_SECRET
    [cron] = fake_infrai.crons
    assert (cron["url"], cron["payload"]) == (f"{PUBLIC}/cron/sweep", {"token": CRON_TOKEN})


async def test_setup_twice_finds_everything_and_creates_nothing_new(
    fake_infrai, infrai_http, sleeps, tmp_path
):
    """A second run reports exists for queues and the cron; subscriptions are not doubled."""
    settings = infrai_settings(fake_infrai, tmp_path)
    await run_setup(fake_infrai, settings, infrai_http, sleeps)
    subscriptions = dict(fake_infrai.subscriptions)
    again = await run_setup(fake_infrai, settings, infrai_http, sleeps)
    assert {r.status for r in again if r.step.kind != "push"} == {"exists"}
    assert fake_infrai.subscriptions == subscriptions
    assert len(fake_infrai.crons) == 1 and len(fake_infrai.queues) == 4
    assert len(fake_infrai.calls_to("/v1/queue/create")) == 4


async def test_the_cron_payload_authenticates_the_sweep(
    fake_infrai, infrai_http, sleeps, tmp_path, client
):
    """The payload the cron stores and sends is accepted by POST /cron/sweep."""
    settings = infrai_settings(fake_infrai, tmp_path)
    await run_setup(fake_infrai, settings, infrai_http, sleeps)
    [cron] = fake_infrai.crons
    response = await client.post("/cron/sweep", json=cron["payload"])
    assert response.status_code == 200, response.text
    wrong = await client.post("/cron/sweep", json={"token": "nope"})
    assert wrong.status_code == 401


async def test_a_queue_with_other_settings_is_reported_not_recreated(
    fake_infrai, infrai_http, sleeps, tmp_path
):
    """An existing queue whose max_retries is too low: differs, with what and what we want."""
    fake_infrai.add_queue("reminders-email-dlq")
    fake_infrai.add_queue("reminders-email", dead_letter_queue="reminders-email-dlq", max_retries=3)
    settings = infrai_settings(fake_infrai, tmp_path)
    results = await run_setup(fake_infrai, settings, infrai_http, sleeps, push=False)
    [email] = [r for r in results if r.step.target == "reminders-email"]
    assert email.status == "differs"
    assert "max_retries 3 (want 20)" in email.detail
    assert "push" not in {r.step.kind for r in results}


async def test_without_a_queue_list_route_a_409_counts_as_exists(
    fake_infrai, infrai_http, sleeps, tmp_path
):
    """Queue list missing: creates are still safe, Infrai's 409 means already there."""
    fake_infrai.queue_list_enabled = False
    settings = infrai_settings(fake_infrai, tmp_path)
    await run_setup(fake_infrai, settings, infrai_http, sleeps)
    fake_infrai.reset(fake_infrai.clock)
    fake_infrai.queue_list_enabled = False
    fake_infrai.add_queue("reminders-email-dlq")
    results = await run_setup(fake_infrai, settings, infrai_http, sleeps, push=False)
    assert results[0].status == "exists" and results[0].detail == "QUEUE_ALREADY_EXISTS"
    assert results[1].status == "created"


async def test_example_cron_field_names_are_sent_when_configured(
    fake_infrai, infrai_http, sleeps, tmp_path
):
    """cron_fields=example sends cron_expr / task_type / task_url, as the docs' example does."""
    settings = infrai_settings(fake_infrai, tmp_path, cron_fields="example")
    await run_setup(fake_infrai, settings, infrai_http, sleeps, push=False)
    [call] = fake_infrai.calls_to("/v1/cron/create")
    assert {"cron_expr", "task_type", "task_url"} <= set(call.json)
    assert "schedule" not in call.json and "url" not in call.json
    assert fake_infrai.crons[0]["url"] == f"{PUBLIC}/cron/sweep"


def test_plan_refuses_a_non_https_public_url(tmp_path):
    """Infrai only pushes to public HTTPS: an http:// base URL is a configuration error."""
    settings = make_settings("sqlite+aiosqlite:///unused.db", tmp_path)
    with pytest.raises(ConfigError, match="HTTPS"):
        plan_setup(settings)
