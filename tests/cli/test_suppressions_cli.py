"""``reminders suppressions``: add, list and lift addresses as the API does."""

from __future__ import annotations

import json

import pytest

from app.db.suppressions import DbSuppressionList
from app.domain.suppression import Suppression, SuppressionReason
from tests.support.cli import invoke
from tests.support.cli_env import service_env


@pytest.fixture
def cli_env(settings, monkeypatch):
    """The environment a deployment would give the CLI, pointed at the test database."""
    env = {**service_env(settings), "REMINDERS_QUEUE": "memory", "COLUMNS": "200"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


async def test_add_list_and_lift(cli_env):
    """add stores the normalized address; list --json shows it; lift removes it."""
    added = await invoke("suppressions", "add", "Bo@Example.ORG", "--detail", "asked")
    assert added.exit_code == 0, added.output
    listed = json.loads((await invoke("suppressions", "list", "--json")).stdout)
    assert [(i["email"], i["reason"], i["source"]) for i in listed["items"]] == [
        ("Bo@example.org", "manual", "cli")
    ]
    lifted = await invoke("suppressions", "lift", "Bo@example.org")
    assert lifted.exit_code == 0 and "lifted Bo@example.org" in lifted.output
    assert json.loads((await invoke("suppressions", "list", "--json")).stdout)["items"] == []


async def test_lifting_a_complaint_needs_force(container, cli_env):
    """lift refuses a complaint (exit 2, naming --force... as force=true) until --force."""
    entry = Suppression("c@example.org", SuppressionReason.COMPLAINT, source="postmark")
    await DbSuppressionList(container.engine, container.receiver.ledger).suppress(
        entry, now=container.clock()
    )
    refused = await invoke("suppressions", "lift", "c@example.org")
    assert refused.exit_code == 2 and "force" in refused.output
    assert (await invoke("suppressions", "lift", "c@example.org", "--force")).exit_code == 0
