"""The base install (no extras) runs everything that needs no extra, and a configuration
that needs a missing extra is refused in one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The modules that exist to talk to an optional integration; nothing else may need one.
INTEGRATION_MODULES = {
    "app.adapters.push_formats.google_oidc",
    "app.adapters.queues.cloudtasks.build",
    "app.adapters.queues.cloudtasks.check",
    "app.adapters.queues.cloudtasks.publisher",
    "app.adapters.queues.cloudtasks.push_format",
    "app.adapters.queues.cloudtasks.setup",
    "app.adapters.queues.google",
    "app.adapters.queues.pubsub.push_format",
    "app.adapters.queues.rabbitmq.consumer",
    "app.adapters.queues.rabbitmq.publisher",
    "app.adapters.queues.rabbitmq.setup",
    "app.adapters.queues.rabbitmq.wire",
    "app.adapters.queues.sns.push_format",
}


def _without_extras(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REMINDERS_")}
    return subprocess.run(
        [sys.executable, "-m", "tests.support.without_extras", *args],
        cwd=ROOT,
        env={**clean, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_module_but_the_integrations_imports_without_extras():
    """Walk every module of app/ with google, AWS, the OpenTelemetry SDK and AMQP missing."""
    result = _without_extras("walk")
    assert result.returncode == 0, result.stderr
    failed = {line.split("\t")[0]: line for line in result.stdout.splitlines() if line}
    assert set(failed) - INTEGRATION_MODULES == set(), "\n".join(failed.values())


def test_the_cli_starts_without_extras(tmp_path):
    """``reminders --help`` on the base install."""
    result = _without_extras("cli", "--help")
    assert result.returncode == 0, result.stderr
    assert "serve" in result.stdout


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"REMINDERS_QUEUE": "pubsub", "REMINDERS_PUBSUB_PROJECT": "p"},
            "REMINDERS_QUEUE=pubsub needs: pip install 'reminder-relay[gcp]'",
        ),
        (
            {
                "REMINDERS_QUEUE": "cloudtasks",
                "REMINDERS_CLOUDTASKS_PROJECT": "p",
                "REMINDERS_CLOUDTASKS_LOCATION": "europe-west1",
            },
            "REMINDERS_QUEUE=cloudtasks needs: pip install 'reminder-relay[gcp]'",
        ),
        (
            {
                "REMINDERS_WEBHOOK_QUEUE_KIND": "sns",
                "REMINDERS_WEBHOOK_QUEUE": "hooks",
                "REMINDERS_SNS_TOPIC_ARNS": "hooks=arn:aws:sns:eu-west-1:123456789012:hooks",
            },
            "REMINDERS_WEBHOOK_QUEUE_KIND=sns needs: pip install 'reminder-relay[aws]'",
        ),
        (
            {"REMINDERS_QUEUE": "rabbitmq"},
            "REMINDERS_QUEUE=rabbitmq needs: pip install 'reminder-relay[rabbitmq]'",
        ),
        (
            {"REMINDERS_QUEUE": "sqs"},
            "REMINDERS_QUEUE=sqs needs: pip install 'reminder-relay[aws]'",
        ),
        (
            {"REMINDERS_OTEL_ENABLED": "true"},
            "REMINDERS_OTEL_ENABLED=true needs: pip install 'reminder-relay[otel]'",
        ),
    ],
)
def test_a_configuration_needing_a_missing_extra_is_one_line(env, line, tmp_path):
    """serve refuses at startup with the extra to install, never a traceback."""
    result = _without_extras(
        "cli",
        "serve",
        "--port",
        "1",
        REMINDERS_DEV_MODE="1",
        REMINDERS_DATABASE_URL=f"sqlite:///{tmp_path}/r.db",
        **env,
    )
    assert result.returncode == 1
    lines = [text for text in result.stderr.splitlines() if text.strip()]
    assert any(line in text for text in lines), result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
