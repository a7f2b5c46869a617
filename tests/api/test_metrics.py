"""/metrics: deliveries, claims, provider latency and sweeps counted; ledger gauges equal
the ledger."""

import dataclasses
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from app.db.ledger.repo import claim_send
from app.db.tables import dead_letters, reminders, send_records
from app.domain.errors import PermanentProviderError, TransientProviderError
from app.domain.ledger import LedgerKey
from app.observability.metrics import InstrumentedProvider
from tests.support.dead_letters import ADMIN, admin_post, exhaust, publish_reminder
from tests.support.flow import push, push_message, put_customer, put_reminder, scrape
from tests.support.push import envelope


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def _scrape(client) -> dict[tuple[str, tuple], float]:
    samples = {}
    for family in text_string_to_metric_families(await scrape(client)):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def test_ledger_gauges_equal_the_ledger(client, container, clock, publisher, provider):
    """Dead letters, their oldest age, stuck sends and sweep lag match SQL over the tables."""
    await exhaust(client, publisher, clock, provider, "r:m1")
    await exhaust(client, publisher, clock, provider, "r:m2")
    await push(client, envelope("r:nobody", message_id="m-nobody"))  # unknown_reminder
    [first, _, _] = (await client.get("/v1/dead-letters", headers=ADMIN)).json()["items"]
    await admin_post(client, f"/v1/dead-letters/{first['id']}/redrive")  # no longer open
    publisher.drain()
    await publish_reminder(client, publisher, clock, "r:stuck-m")
    key = LedgerKey("r:stuck-m", "email", provider.name)
    async with container.engine.begin() as conn:
        await claim_send(conn, key, now=clock.now, lease_until=clock.now + timedelta(seconds=30))
    await put_customer(client, "cust_late")
    await put_reminder(client, "r:late", customer_id="cust_late", due_at=clock.now)
    clock.advance(minutes=10)

    scraped = await _scrape(client)
    now = clock.now
    async with container.engine.connect() as conn:
        open_rows = (
            await conn.execute(
                select(dead_letters.c.reason, func.count(), func.min(dead_letters.c.created_at))
                .where(dead_letters.c.redriven_at.is_(None))
                .group_by(dead_letters.c.reason)
            )
        ).all()
        stuck = (
            await conn.execute(
                select(func.count()).where(
                    send_records.c.state == "sending", send_records.c.lease_until <= now
                )
            )
        ).scalar_one()
        overdue = (
            (
                await conn.execute(
                    select(reminders.c.due_at).where(
                        reminders.c.state == "scheduled", reminders.c.due_at <= now
                    )
                )
            )
            .scalars()
            .all()
        )
    assert {reason for reason, _, _ in open_rows} == {"attempts_exhausted", "unknown_reminder"}
    for reason, count, oldest in open_rows:
        assert scraped[("reminders_dead_letters", (("reason", reason),))] == count
        age = scraped[("reminders_dead_letter_oldest_age_seconds", (("reason", reason),))]
        assert age == (now - _aware(oldest)).total_seconds()
    assert scraped[("reminders_sends_stuck", ())] == stuck == 1
    assert (
        scraped[("reminders_sweep_lag_seconds", ())] == 600 == (now - min(overdue)).total_seconds()
    )
    assert scraped[("reminders_ledger_up", ())] == 1


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def test_deliveries_and_claims_are_counted_once_per_attempt(
    client, clock, publisher, provider
):
    """A retry then a send counts two claims and one reclaim; a duplicate claims nothing."""
    labels = {"queue": "reminders", "channel": "email"}
    before = {
        "retry": _value("reminders_deliveries_total", **labels, outcome="retry"),
        "sent": _value("reminders_deliveries_total", **labels, outcome="sent"),
        "duplicate": _value("reminders_deliveries_total", **labels, outcome="duplicate"),
        "claims": _value("reminders_claims_total", channel="email"),
        "reclaims": _value("reminders_reclaims_total", channel="email"),
    }
    message = await publish_reminder(client, publisher, clock, "r:count")
    provider.script.append(TransientProviderError("timeout", detail_class="timeout"))
    assert (await push_message(client, message)).json()["outcome"] == "retry"
    clock.advance(hours=1)
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    assert (await push_message(client, message)).json()["outcome"] == "duplicate"
    after = {
        "retry": _value("reminders_deliveries_total", **labels, outcome="retry"),
        "sent": _value("reminders_deliveries_total", **labels, outcome="sent"),
        "duplicate": _value("reminders_deliveries_total", **labels, outcome="duplicate"),
        "claims": _value("reminders_claims_total", channel="email"),
        "reclaims": _value("reminders_reclaims_total", channel="email"),
    }
    assert {k: after[k] - before[k] for k in after} == {
        "retry": 1,
        "sent": 1,
        "duplicate": 1,
        "claims": 2,
        "reclaims": 1,
    }


async def test_a_terminal_answer_to_a_redelivery_is_not_a_claim(client, clock, publisher, provider):
    """The permanent failure claims once; its redelivery is answered without a claim."""
    before = _value("reminders_claims_total", channel="email")
    message = await publish_reminder(client, publisher, clock, "r:perm")
    provider.script.append(PermanentProviderError("550", detail_class="smtp_5xx"))
    assert (await push_message(client, message)).json()["outcome"] == "terminal"
    assert (await push_message(client, message)).json()["outcome"] == "terminal"
    assert _value("reminders_claims_total", channel="email") - before == 1


async def test_provider_latency_is_observed_by_result(
    container, clock, publisher, provider, client
):
    """The instrumenting wrapper records each call under ok or the error class."""
    wrapped = InstrumentedProvider(provider)
    providers = {"email": wrapped, "webhook": wrapped}
    container.receiver = dataclasses.replace(container.receiver, providers=providers)
    name = "reminders_provider_latency_seconds_count"
    ok = _value(name, provider="scripted", channel="email", result="ok")
    failed = _value(name, provider="scripted", channel="email", result="transient")
    message = await publish_reminder(client, publisher, clock, "r:latency")
    provider.script.append(TransientProviderError("503"))
    await push_message(client, message)
    clock.advance(hours=1)
    await push_message(client, message)
    assert _value(name, provider="scripted", channel="email", result="ok") - ok == 1
    assert _value(name, provider="scripted", channel="email", result="transient") - failed == 1
    assert wrapped.name == provider.name


async def test_sweeps_and_refused_pushes_are_counted(client, clock, publisher):
    """A sweep adds to the enqueued counter; an unsigned push to the refusal counter."""
    enqueued = _value("reminders_sweep_enqueued_total")
    sweeps = _value("reminders_sweep_duration_seconds_count")
    refused = _value("reminders_push_refused_total", reason="unauthenticated")
    await publish_reminder(client, publisher, clock, "r:swept")
    assert _value("reminders_sweep_enqueued_total") - enqueued == 1
    assert _value("reminders_sweep_duration_seconds_count") - sweeps == 1
    assert (await client.post("/push/reminders", content=b"{}")).status_code == 401
    assert _value("reminders_push_refused_total", reason="unauthenticated") - refused == 1


async def test_reminders_settled_are_counted_by_delivery_summary(
    client, clock, publisher, provider
):
    """reminders_settled_24h{delivery} lists every summary at zero from the first scrape,
    then counts a dead-lettered reminder as undelivered and an accepted one as delivered,
    for 24 hours."""
    first = await _scrape(client)
    for summary in ("delivered", "partially_delivered", "undelivered", "withheld"):
        assert first[("reminders_settled_24h", (("delivery", summary),))] == 0
    await exhaust(client, publisher, clock, provider, "r:dead")
    message = await publish_reminder(client, publisher, clock, "r:ok")
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    scraped = await _scrape(client)
    assert scraped[("reminders_settled_24h", (("delivery", "undelivered"),))] == 1
    assert scraped[("reminders_settled_24h", (("delivery", "delivered"),))] == 1
    assert scraped[("reminders_settled_24h", (("delivery", "withheld"),))] == 0
    clock.advance(hours=25)
    later = await _scrape(client)
    assert later[("reminders_settled_24h", (("delivery", "undelivered"),))] == 0
