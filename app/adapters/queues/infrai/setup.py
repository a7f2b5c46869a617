"""``reminders setup-infrai``: create what the service needs on Infrai, idempotently.

For each channel queue: its dead-letter queue, then the queue (``dead_letter_queue``,
``max_retries`` above our attempt ceiling, visibility timeout above our lease), then a push
subscription to ``{PUBLIC_BASE_URL}/push/{queue}`` signed with the current push secret;
finally one cron job POSTing ``{PUBLIC_BASE_URL}/cron/sweep`` with the cron token inside
its stored ``payload`` (``cron.create`` has no headers field).

Idempotent: existing queues and crons are found through the list routes and reported
(``exists``, or ``differs`` when their settings are not ours; Infrai documents no update
route, so those are changed by hand); creates carry stable idempotency keys, and a 409 /
``*_EXISTS`` answer counts as ``exists``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.domain.errors import ConfigError
from app.settings import Settings

from .api import InfraiApi, InfraiError
from .requests import (
    QueueSpec,
    create_queue_body,
    cron_create_body,
    mask_secrets,
    push_subscribe_body,
)

CREATE_QUEUE_PATH = "/queue/create"  # documented
CRON_CREATE_PATH = "/cron/create"  # documented
CRON_LIST_PATH = "/cron/list"  # documented

StepKind = Literal["dlq", "queue", "push", "cron"]
Status = Literal["would call", "created", "subscribed", "exists", "differs", "failed"]


@dataclass(frozen=True, slots=True)
class SetupStep:
    """One call ``setup-infrai`` makes (or, with ``--dry-run``, would make)."""

    kind: StepKind
    target: str
    capability: str
    method: str
    path: str
    body: dict[str, Any]
    secret_fields: tuple[str, ...] = ()

    def shown(self) -> dict[str, Any]:
        """The body with secrets masked, for printing."""
        return mask_secrets(self.body, self.secret_fields)


@dataclass(frozen=True, slots=True)
class SetupResult:
    """What happened to one step."""

    step: SetupStep
    status: Status
    detail: str = ""


def queue_specs(settings: Settings) -> list[QueueSpec]:
    """Every queue we need, each dead-letter queue before the queue that names it."""
    infrai = settings.infrai
    visibility = infrai.visibility_timeout(settings.lease_seconds)
    specs: list[QueueSpec] = []
    for name in sorted(set(settings.channel_queues.values())):
        dlq = name + infrai.dlq_suffix
        for queue, dead_letter in ((dlq, None), (name, dlq)):
            specs.append(
                QueueSpec(
                    name=queue,
                    dead_letter_queue=dead_letter,
                    max_retries=infrai.queue_max_retries,
                    visibility_timeout=visibility,
                    retention_days=infrai.message_retention_days,
                    type=infrai.queue_type,
                )
            )
    return specs


def plan_setup(settings: Settings, *, push: bool = True) -> list[SetupStep]:
    """Every call, in order; ``push=False`` for pull-worker deployments."""
    base = settings.public_base_url.rstrip("/")
    if not base.startswith("https://"):
        raise ConfigError(
            f"REMINDERS_PUBLIC_BASE_URL={base!r}: Infrai pushes and calls crons only over "
            "public HTTPS"
        )
    infrai = settings.infrai
    steps = [
        SetupStep(
            "dlq" if spec.dead_letter_queue is None else "queue",
            spec.name,
            "queue.create",
            "POST",
            CREATE_QUEUE_PATH,
            create_queue_body(spec),
        )
        for spec in queue_specs(settings)
    ]
    if push:
        steps.extend(_push_steps(settings, base))
    token = settings.cron_token.get_secret_value()
    cron = cron_create_body(
        name=infrai.cron_name,
        schedule=infrai.cron_schedule,
        url=f"{base}/cron/sweep",
        token=token,
        retries=infrai.cron_retries,
        fields=infrai.cron_fields,
    )
    steps.append(
        SetupStep(
            "cron", infrai.cron_name, "cron.create", "POST", CRON_CREATE_PATH, cron, ("token",)
        )
    )
    return steps


def _push_steps(settings: Settings, base: str) -> list[SetupStep]:
    infrai = settings.infrai
    secret = settings.push_secrets[0].get_secret_value() if settings.push_secrets else None
    steps = []
    for queue in sorted(set(settings.channel_queues.values())):
        body = push_subscribe_body(
            url=f"{base}/push/{queue}",
            secret=secret,
            url_field=infrai.push_url_field,
            secret_field=infrai.push_secret_field,
            queue=queue,
        )
        path = infrai.push_subscribe_path.replace("{queue}", queue)
        steps.append(
            SetupStep(
                "push",
                queue,
                "queue.push_subscribe",
                "POST",
                path,
                body,
                (infrai.push_secret_field,),
            )
        )
    return steps


async def apply_setup(
    api: InfraiApi, steps: list[SetupStep], *, queue_list_path: str
) -> list[SetupResult]:
    """Run the steps in order; existing resources are reported, not recreated."""
    queues = await list_queues(api, queue_list_path)
    crons = await list_crons(api)
    results = []
    for step in steps:
        if step.kind in ("dlq", "queue") and queues is not None and step.target in queues:
            results.append(_compare_queue(step, queues[step.target]))
        elif step.kind == "cron" and step.target in crons:
            results.append(_compare_cron(step, crons[step.target]))
        else:
            results.append(await _create(api, step))
    return results


async def list_queues(api: InfraiApi, path: str) -> dict[str, dict[str, Any]] | None:
    """Existing queues by name; None when the list route is not configured or missing."""
    if not path:
        return None
    try:
        data = await api.call("queue.list", "GET", path)
    except InfraiError as error:
        if error.route_missing:
            return None
        raise
    return _by_name(data, ("items", "queues"))


async def list_crons(api: InfraiApi) -> dict[str, dict[str, Any]]:
    """Existing cron jobs by name (``cron.list`` is documented)."""
    return _by_name(await api.call("cron.list", "GET", CRON_LIST_PATH), ("items", "crons"))


def _by_name(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    items: list[Any] = next((data[k] for k in keys if isinstance(data.get(k), list)), [])
    return {
        str(item["name"]): item for item in items if isinstance(item, dict) and item.get("name")
    }


async def _create(api: InfraiApi, step: SetupStep) -> SetupResult:
    try:
        data = await api.call(
            step.capability,
            step.method,
            step.path,
            step.body,
            idempotency_key=step.body.get("idempotency_key"),
        )
    except InfraiError as error:
        if error.status == 409 or (error.code or "").endswith("EXISTS"):
            return SetupResult(step, "exists", error.code or "409")
        return SetupResult(step, "failed", str(error))
    ident = data.get("cron_id") or data.get("subscription_id") or data.get("name") or ""
    # No list route for subscriptions: Infrai answers a repeat with the same subscription.
    return SetupResult(step, "subscribed" if step.kind == "push" else "created", str(ident))


def _compare_queue(step: SetupStep, existing: dict[str, Any]) -> SetupResult:
    wanted = {
        key: step.body[key]
        for key in ("dead_letter_queue", "max_retries", "visibility_timeout_default")
        if key in step.body
    }
    diffs = [
        f"{key} {existing.get(key)!r} (want {value!r})"
        for key, value in wanted.items()
        if key in existing and existing.get(key) != value
    ]
    if diffs:
        return SetupResult(step, "differs", "; ".join(diffs) + " — no update route: fix by hand")
    return SetupResult(step, "exists")


def _compare_cron(step: SetupStep, existing: dict[str, Any]) -> SetupResult:
    url = existing.get("url") or existing.get("task_url")
    wanted = step.body.get("url") or step.body.get("task_url")
    if url != wanted:
        return SetupResult(step, "differs", f"url {url!r} (want {wanted!r})")
    return SetupResult(step, "exists", str(existing.get("cron_id", "")))
