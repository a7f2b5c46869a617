"""``reminders check``: does Infrai (still) accept exactly what we send?

1. Fetch the public discovery index and, for each capability we call, its document.
2. The capability must be listed and available, at the method and path we use.
3. Every request body we send (built by the same functions the publisher, the worker and
   ``setup-infrai`` use) must validate against the published parameter schema.
4. With an API key: our queues and their dead-letter queues exist, and each queue's
   ``max_retries`` is above ``REMINDERS_MAX_ATTEMPTS`` (our own dead-letter set must see
   exhaustion first); the sweep cron exists.

Documented capabilities missing from discovery fail; ones only seen in client code
(batch, consume, ack, nack, push subscription, queue list) warn when missing, because
their paths are settings and Infrai may simply not publish them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.domain.errors import ReminderRelayError
from app.domain.messages import DeliveryPayload, OutgoingMessage, idempotency_key
from app.domain.queueing import MAX_DELAY_SECONDS
from app.settings import Settings

from .api import InfraiApi
from .discovery import CheckResult, Discovery, SentRequest, base_path, check_discovery
from .publisher import PUBLISH_PATH
from .requests import (
    ack_body,
    batch_bodies,
    consume_body,
    nack_body,
    publish_body,
)
from .setup import CRON_LIST_PATH, list_crons, list_queues, plan_setup


def requests_we_send(settings: Settings, *, push: bool = True) -> list[SentRequest]:
    """The bodies the publisher, the pull worker and ``setup-infrai`` send, as they send them."""
    infrai = settings.infrai
    queues = sorted(set(settings.channel_queues.values()))
    channel_of = {queue: channel for channel, queue in settings.channel_queues.items()}
    samples = [
        OutgoingMessage(
            queue,
            DeliveryPayload("digest:cust_1842:2026-W33", channel_of[queue], 3).to_json(),
            MAX_DELAY_SECONDS,  # the horizon's edge: the largest delay we ever send
            idempotency_key("digest:cust_1842:2026-W33", channel_of[queue], 3),
        )
        for queue in queues
    ]
    sent = [
        SentRequest("queue.publish", "POST", PUBLISH_PATH, publish_body(m), m.queue)
        for m in samples
    ]
    if infrai.batch_path:
        for body, _ in batch_bodies(samples, shape=infrai.batch_shape):
            sent.append(
                SentRequest("queue.publish_batch", "POST", infrai.batch_path, body, "batch")
            )
    visibility = infrai.visibility_timeout(settings.lease_seconds)
    for queue in queues:
        consume = consume_body(
            queue, max_messages=infrai.worker_max_messages, visibility_timeout=visibility
        )
        sent.append(SentRequest("queue.consume", "POST", infrai.consume_path, consume, queue))
        sent.append(SentRequest("queue.ack", "POST", infrai.ack_path, ack_body(queue, "m"), queue))
        if infrai.nack_path:
            nack = nack_body(queue, "m", delay=60, delay_field=infrai.nack_delay_field)
            sent.append(SentRequest("queue.nack", "POST", infrai.nack_path, nack, queue))
    for step in plan_setup(settings, push=push):
        # Discovery publishes path templates: compare the push route as a template.
        path = infrai.push_subscribe_path if step.kind == "push" else step.path
        sent.append(
            SentRequest(
                step.capability, step.method, path, step.body, step.target, step.secret_fields
            )
        )
    if infrai.queue_list_path:
        sent.append(SentRequest("queue.list", "GET", infrai.queue_list_path, None, "setup, check"))
    sent.append(SentRequest("cron.list", "GET", CRON_LIST_PATH, None, "setup, check"))
    return sent


async def check_queues(
    api: InfraiApi, settings: Settings, *, queue_list_path: str
) -> list[CheckResult]:
    """Queues and DLQs exist; max_retries above our attempt ceiling; the sweep cron exists."""
    try:
        queues = await list_queues(api, queue_list_path)
    except ReminderRelayError as error:
        return [CheckResult("queues", "fail", str(error))]
    if queues is None:
        return [
            CheckResult(
                "queues",
                "fail",
                "no queue list route (REMINDERS_INFRAI_QUEUE_LIST_PATH): cannot verify queues; "
                "use --skip-queues to accept that",
            )
        ]
    results = [
        _check_queue(name, queues, settings)
        for name in sorted(set(settings.channel_queues.values()))
    ]
    results.append(await _check_cron(api, settings))
    return results


def _check_queue(name: str, queues: dict[str, dict[str, Any]], settings: Settings) -> CheckResult:
    label = f"queue {name}"
    queue = queues.get(name)
    if queue is None:
        return CheckResult(label, "fail", "missing: run `reminders setup-infrai`")
    dlq = queue.get("dead_letter_queue")
    if not dlq:
        return CheckResult(label, "fail", "no dead_letter_queue")
    if dlq not in queues:
        return CheckResult(label, "fail", f"dead-letter queue {dlq} does not exist")
    retries = queue.get("max_retries")
    if not isinstance(retries, int):
        return CheckResult(label, "warn", f"DLQ {dlq}; max_retries not reported")
    if retries <= settings.max_attempts:
        return CheckResult(
            label,
            "fail",
            f"max_retries {retries} <= REMINDERS_MAX_ATTEMPTS {settings.max_attempts}: Infrai's "
            "DLQ would take messages our ledger still retries",
        )
    return CheckResult(label, "pass", f"DLQ {dlq}, max_retries {retries} > {settings.max_attempts}")


async def _check_cron(api: InfraiApi, settings: Settings) -> CheckResult:
    name = settings.infrai.cron_name
    try:
        crons = await list_crons(api)
    except ReminderRelayError as error:
        return CheckResult(f"cron {name}", "fail", str(error))
    if name not in crons:
        return CheckResult(f"cron {name}", "warn", "missing: run `reminders setup-infrai`")
    job = crons[name]
    return CheckResult(f"cron {name}", "pass", str(job.get("url") or job.get("task_url")))


async def run_check(
    discovery: Discovery,
    api: InfraiApi,
    settings: Settings,
    *,
    push: bool = True,
    skip_queues: bool = False,
) -> list[CheckResult]:
    """Every check, in table order."""
    try:
        sent = requests_we_send(settings, push=push)
    except ReminderRelayError as error:
        return [CheckResult("configuration", "fail", str(error))]
    results = await check_discovery(discovery, sent, base_path=base_path(settings.infrai.base_url))
    if skip_queues:
        results.append(CheckResult("queues", "warn", "not verified (--skip-queues)"))
    elif not settings.infrai.api_key.get_secret_value():
        results.append(CheckResult("queues", "fail", "REMINDERS_INFRAI_API_KEY is not set"))
    else:
        results.extend(
            await check_queues(api, settings, queue_list_path=settings.infrai.queue_list_path)
        )
    return results


def passed(results: Iterable[CheckResult]) -> bool:
    """True when no check failed (warnings pass)."""
    return all(result.status != "fail" for result in results)
