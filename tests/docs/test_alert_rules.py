"""The shipped alert rules and dashboard read metrics the service exports from its first
scrape (at zero before any event), and promtool accepts the rules file.

An alert on a series that does not exist yet never fires (``rate()`` of nothing is
nothing), and an expression naming a metric we renamed stays silent forever: both fail here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.adapters.queues.embedded.publisher import EmbeddedQueuePublisher
from app.domain.messages import OutgoingMessage
from tests.support.flow import METRICS

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "reminder-relay.json"
METRIC = re.compile(r"\b((?:reminders|process)_[a-z0-9_]+)\b")


def rule_expressions() -> list[str]:
    """Every alert's expression in the rules file."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def dashboard_expressions() -> list[str]:
    """Every panel query of the Grafana dashboard."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def documented_alert_expressions() -> list[str]:
    """The expression column of the alert table in docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text()
    table = text.split("| alert | expression", 1)[1].split("\n\n", 1)[0]
    return [line.split("|")[2] for line in table.splitlines()[2:] if line.startswith("|")]


async def exported_names(client, *, declared: bool = False) -> set[str]:
    """The sample names of a fresh service's first scrape (``declared``: also the series of
    every family it declares, such as a labelled histogram nothing has observed yet)."""
    await client._transport.app.state.container.ledger_metrics.refresh()
    response = await client.get("/metrics", headers=METRICS)
    assert response.status_code == 200
    names = set()
    for family in text_string_to_metric_families(response.text):
        names |= {sample.name for sample in family.samples}
        if declared:
            names |= {family.name + suffix for suffix in ("", "_total", "_bucket", "_count")}
    return names


@pytest.mark.parametrize(
    ("source", "declared"),
    [
        (rule_expressions, False),
        (documented_alert_expressions, False),
        (dashboard_expressions, True),
    ],
)
async def test_every_expression_names_a_metric_exported_from_startup(client, source, declared):
    """Alert rules and the operations guide's alerts only name series a fresh service
    exports (a graph may also show a declared series that has no sample yet)."""
    exported = await exported_names(client, declared=declared)
    expressions = source()
    assert expressions
    for expression in expressions:
        named = set(METRIC.findall(expression))
        assert named, expression
        assert named <= exported, f"{expression}: {sorted(named - exported)} not exported"


async def test_alerted_label_values_exist_from_startup(client):
    """The labelled series alerts select on are there before any event of this process
    (at zero in a fresh one; counters are per process, so earlier tests may have counted)."""
    await client._transport.app.state.container.ledger_metrics.refresh()
    response = await client.get("/metrics", headers=METRICS)
    for series in (
        'reminders_push_refused_total{reason="unauthenticated"}',
        'reminders_deliveries_total{channel="email",outcome="retry",queue="reminders"}',
        'reminders_dead_letters{reason="attempts_exhausted"}',
        'reminders_embedded_queue_messages{queue="reminders",state="due"}',
        'reminders_embedded_queue_messages{queue="reminders",state="delayed"}',
        "reminders_sweep_errors_total",
    ):
        assert re.search(rf"^{re.escape(series)} \d", response.text, re.MULTILINE), series
    assert 'reminders_dead_letters{reason="attempts_exhausted"} 0.0' in response.text
    assert re.search(r'reminders_build_info\{version="[^"]+"\} 1\.0', response.text)


def test_promtool_accepts_the_rules():
    """`promtool check rules` (Debian's prometheus package; .ci/run installs it)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("REMINDERS_CI"):
            pytest.fail("REMINDERS_CI is set but promtool is missing: .ci/run installs it")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_the_embedded_queue_depth_splits_due_from_delayed(client, container, clock):
    """A message delayed by days is `delayed`, not counted with what is due now."""
    queue = EmbeddedQueuePublisher(container.engine, clock=clock)
    await queue.publish(OutgoingMessage("reminders", {"v": 1, "n": 1}, 0, "due-now"))
    await queue.publish(OutgoingMessage("reminders", {"v": 1, "n": 2}, 3 * 86400, "in-3-days"))
    await client._transport.app.state.container.ledger_metrics.refresh()
    response = await client.get("/metrics", headers=METRICS)
    assert 'reminders_embedded_queue_messages{queue="reminders",state="due"} 1.0' in response.text
    assert (
        'reminders_embedded_queue_messages{queue="reminders",state="delayed"} 1.0' in response.text
    )
