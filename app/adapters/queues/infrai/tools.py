"""Infrai's ``setup`` and ``check`` steps, as ``reminders setup --queue infrai`` (alias
``reminders setup-infrai``) and ``reminders check`` run them.

Each opens its own API client (Infrai's retries, timeout and key; not the shared pool)
and closes it. Setup honours ``--dry-run`` (the calls, with secrets masked, and none made)
and ``--pull`` (no push subscriptions); check honours ``--discovery-file``, ``--pull`` and
``--skip-queues``.
"""

from __future__ import annotations

import json

from app.adapters.channels.http import SharedHttp
from app.domain.errors import ReminderRelayError
from app.settings import Settings

from ..kind import Report, SetupRefused, ToolOptions, check_report
from .api import InfraiApi
from .check import run_check
from .discovery import Discovery, FileDiscovery, HttpDiscovery
from .publisher import build_http_client, infrai_config
from .setup import SetupResult, SetupStep, apply_setup, plan_setup


def _api(settings: Settings) -> InfraiApi:
    return InfraiApi(build_http_client(settings.infrai), infrai_config(settings.infrai))


async def setup_infrai(
    settings: Settings, http: SharedHttp | None = None, options: ToolOptions | None = None
) -> Report:
    """Create the queues, DLQs, push subscriptions and the sweep cron (idempotent)."""
    options = options or ToolOptions()
    try:
        steps = plan_setup(settings, push=not options.pull)
    except ReminderRelayError as error:  # e.g. no public HTTPS URL: nothing to call
        raise SetupRefused(str(error)) from None
    if options.dry_run:
        results = [SetupResult(step, "would call") for step in steps]
    else:
        api = _api(settings)
        try:
            results = await apply_setup(api, steps, queue_list_path=settings.infrai.queue_list_path)
        finally:
            await api.client.aclose()
    return _setup_report(settings, results, dry_run=options.dry_run)


def _setup_report(settings: Settings, results: list[SetupResult], *, dry_run: bool) -> Report:
    base = settings.infrai.base_url.rstrip("/")
    title = "setup-infrai (dry run: no call made)" if dry_run else "setup-infrai"
    rows = [
        (r.step.kind, r.step.target, r.status, _call(base, r, dry_run=dry_run)) for r in results
    ]
    failed = any(result.status == "failed" for result in results)
    return Report(title, ("step", "target", "result", "call"), rows, failed)


def _call(base: str, result: SetupResult, *, dry_run: bool) -> str:
    step: SetupStep = result.step
    call = f"{step.method} {base}{step.path}"
    if dry_run:
        return call + " " + json.dumps(step.shown(), sort_keys=True)
    return call + (f"\n{result.detail}" if result.detail else "")


async def check_infrai(
    settings: Settings, http: SharedHttp | None = None, options: ToolOptions | None = None
) -> Report:
    """Our exact requests against Infrai's published schemas; the queues and the cron."""
    options = options or ToolOptions()
    api = _api(settings)
    discovery: Discovery = (
        FileDiscovery(options.discovery_file) if options.discovery_file else HttpDiscovery(api)
    )
    try:
        results = await run_check(
            discovery, api, settings, push=not options.pull, skip_queues=options.skip_queues
        )
    finally:
        await api.client.aclose()
    return check_report(results, f"Infrai check ({settings.infrai.base_url})")
