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

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlparse

from jsonschema import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for

from app.adapters.queues.infrai import PUBLISH_PATH
from app.adapters.queues.infrai_api import InfraiApi, InfraiError
from app.adapters.queues.infrai_requests import (
    SEVEN_DAYS,
    ack_body,
    batch_bodies,
    consume_body,
    nack_body,
    publish_body,
)
from app.domain.errors import ReminderRelayError
from app.domain.messages import DeliveryPayload, OutgoingMessage, idempotency_key
from app.services.infrai_setup import CRON_LIST_PATH, list_crons, list_queues, plan_setup
from app.settings import Settings

Status = Literal["pass", "warn", "fail"]
DOCUMENTED = frozenset({"queue.publish", "queue.create", "cron.create", "cron.list"})
_PLACEHOLDER = re.compile(r"\{[^}]*\}|:[A-Za-z_]+")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One line of the pass/fail table."""

    check: str
    status: Status
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SentRequest:
    """A request exactly as we send it (body None for GETs)."""

    capability: str
    method: str
    path: str
    body: dict[str, Any] | None
    label: str
    secret_fields: tuple[str, ...] = ()


class Discovery(Protocol):
    """Where discovery documents come from: Infrai itself, or a recorded file."""

    async def index(self) -> dict[str, Any]:
        """The ``GET /v1/discovery`` document."""
        ...

    async def capability(self, capability: str) -> dict[str, Any]:
        """The ``GET /v1/discovery/{capability}`` document."""
        ...


class HttpDiscovery:
    """Discovery fetched from Infrai (public, no key)."""

    def __init__(self, api: InfraiApi) -> None:
        self._api = api

    async def index(self) -> dict[str, Any]:
        """The live index."""
        return await self._api.fetch_document("discovery", "/discovery")

    async def capability(self, capability: str) -> dict[str, Any]:
        """The live capability document."""
        return await self._api.fetch_document("discovery", f"/discovery/{capability}")


class FileDiscovery:
    """Discovery recorded in a file: ``{"index": {...}, "capabilities": {id: {...}}}``."""

    def __init__(self, path: Path) -> None:
        self._document = json.loads(path.read_text())

    async def index(self) -> dict[str, Any]:
        """The recorded index."""
        return dict(self._document["index"])

    async def capability(self, capability: str) -> dict[str, Any]:
        """The recorded capability document."""
        found = self._document.get("capabilities", {}).get(capability)
        if found is None:
            raise InfraiError(f"no recorded discovery document for {capability}", status=404)
        return dict(found)


def requests_we_send(settings: Settings, *, push: bool = True) -> list[SentRequest]:
    """The bodies the publisher, the pull worker and ``setup-infrai`` send, as they send them."""
    infrai = settings.infrai
    queues = sorted(set(settings.channel_queues.values()))
    channel_of = {queue: channel for channel, queue in settings.channel_queues.items()}
    samples = [
        OutgoingMessage(
            queue,
            DeliveryPayload("digest:cust_1842:2026-W33", channel_of[queue], 3).to_json(),
            SEVEN_DAYS,  # the horizon's edge: the largest delay we ever send
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


async def check_discovery(
    discovery: Discovery, sent: list[SentRequest], *, base_path: str
) -> list[CheckResult]:
    """Each capability we call is published at our method/path and accepts our bodies."""
    try:
        index = await discovery.index()
    except ReminderRelayError as error:
        return [CheckResult("discovery", "fail", str(error))]
    listed = {str(c.get("id")): c for c in index.get("capabilities", []) if isinstance(c, dict)}
    results = [
        CheckResult(
            "discovery", "pass", f"version {index.get('version')}, {len(listed)} capabilities"
        )
    ]
    for capability in dict.fromkeys(request.capability for request in sent):
        requests = [r for r in sent if r.capability == capability]
        results.extend(await _check_capability(discovery, listed, requests, base_path))
    return results


async def _check_capability(
    discovery: Discovery,
    listed: dict[str, dict[str, Any]],
    requests: list[SentRequest],
    base_path: str,
) -> list[CheckResult]:
    capability = requests[0].capability
    entry = listed.get(capability)
    if entry is None:
        status: Status = "fail" if capability in DOCUMENTED else "warn"
        path = base_path + requests[0].path
        return [CheckResult(capability, status, f"not in discovery (we call {path})")]
    if entry.get("available") is False:
        return [CheckResult(capability, "fail", "listed as unavailable")]
    problem = _route_mismatch(entry, requests[0], base_path)
    if problem:
        return [CheckResult(capability, "fail", problem)]
    try:
        document = await discovery.capability(capability)
    except ReminderRelayError as error:
        return [CheckResult(capability, "fail", f"no discovery document: {error}")]
    schema = parameter_schema(document.get("parameters"))
    return [_validate(capability, schema, r) for r in requests if r.body is not None] or [
        CheckResult(capability, "pass", f"{entry.get('method')} {entry.get('path')}")
    ]


def _route_mismatch(entry: dict[str, Any], request: SentRequest, base_path: str) -> str | None:
    ours = _PLACEHOLDER.sub("{}", base_path + request.path)
    theirs = _PLACEHOLDER.sub("{}", str(entry.get("path", "")))
    method = str(entry.get("method", request.method)).upper()
    if ours != theirs or method != request.method:
        return (
            f"published as {method} {entry.get('path')}, we call {request.method} "
            f"{base_path + request.path} (adjust the REMINDERS_INFRAI_*_PATH setting)"
        )
    return None


def parameter_schema(parameters: Any) -> dict[str, Any]:
    """A JSON Schema from ``parameters``: a schema already, or a list of named parameters."""
    if isinstance(parameters, dict) and (
        "type" in parameters or "properties" in parameters or "$schema" in parameters
    ):
        return parameters
    if isinstance(parameters, list):
        body = [p for p in parameters if isinstance(p, dict) and p.get("in", "body") == "body"]
        return {
            "type": "object",
            "properties": {
                str(p["name"]): p.get("schema") or {k: v for k, v in p.items() if k == "type"}
                for p in body
                if p.get("name")
            },
            "required": [str(p["name"]) for p in body if p.get("required") and p.get("name")],
        }
    return {"type": "object"}


def _validate(capability: str, schema: dict[str, Any], request: SentRequest) -> CheckResult:
    name = f"{capability} ({request.label})"
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as error:
        return CheckResult(name, "fail", f"published schema is not valid: {error.message}")
    errors = sorted(cls(schema).iter_errors(request.body), key=lambda e: list(e.path))
    if not errors:
        return CheckResult(name, "pass", "our body matches the published schema")
    secrets = _secret_values(request.body, request.secret_fields)
    return CheckResult(name, "fail", "; ".join(_describe(e, secrets) for e in errors))


def _secret_values(body: Any, names: Iterable[str]) -> list[str]:
    names = set(names)
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in names and isinstance(value, str) and value:
                found.append(value)
            found.extend(_secret_values(value, names))
    return found


def _describe(error: Any, secrets: list[str]) -> str:
    where = "/".join(str(part) for part in error.path) or "(body)"
    if any(secret in error.message for secret in secrets):
        # jsonschema messages quote the offending value; never print a secret.
        return f"{where}: fails {error.validator} {error.validator_value!r}"
    return f"{where}: {error.message}"


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


def base_path(base_url: str) -> str:
    """The path part of the base URL (``/v1``), which discovery paths include."""
    return urlparse(base_url).path.rstrip("/")


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
