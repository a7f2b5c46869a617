"""``reminders check`` for Cloud Tasks: each queue exists and retries longer than our own
attempts. Credentials and OIDC cannot be proven from here: the first push does that."""

from __future__ import annotations

import os
from typing import Any

from google.api_core import exceptions as google_errors

from app.adapters.channels.http import SharedHttp
from app.adapters.queues.kind import CheckResult, Report, ToolOptions, check_report
from app.settings import Settings

from ..parts import QueueParts
from .build import CLOUD_TASKS_EMULATOR, cloudtasks_target
from .publisher import cloudtasks_client_factory


async def check_queues(
    settings: Settings, http: SharedHttp, options: ToolOptions | None = None
) -> Report:
    """One result per Cloud Tasks queue."""
    queues = settings.queues_of_kind("cloudtasks")
    parts = QueueParts(settings, http=http)
    client = cloudtasks_client_factory(os.environ.get(CLOUD_TASKS_EMULATOR) or None)()
    try:
        return check_report([await _check_queue(client, parts, queue) for queue in queues])
    finally:
        await client.transport.close()


async def _check_queue(client: Any, parts: QueueParts, queue: str) -> CheckResult:
    path = cloudtasks_target(parts).queue_path(queue)
    name = f"cloudtasks queue {queue}"
    try:
        found = await client.get_queue(name=path)
    except google_errors.GoogleAPIError as error:
        return CheckResult(name, "fail", f"{error} (run reminders setup --queue cloudtasks)")
    attempts = found.retry_config.max_attempts
    if 0 < attempts <= parts.settings.max_attempts:
        return CheckResult(name, "fail", f"gives up after {attempts} attempts, before us")
    return CheckResult(name, "pass", f"exists, max attempts {attempts or 'default'}")
