"""``reminders dead-letters``: the CLI finds, shows, dry-runs and redrives dead letters."""

import json

import anyio
import pytest
from typer.testing import CliRunner

import app.cli.dead_letters as cli_module
from app.cli import cli
from app.container import open_container
from tests.support.cli_env import service_env
from tests.support.dead_letters import exhaust
from tests.support.flow import get_reminder, push, push_message


@pytest.fixture
def cli_env(settings, monkeypatch):
    """The environment a deployment would give the CLI, pointed at the test database."""
    env = {**service_env(settings), "REMINDERS_QUEUE": "memory", "COLUMNS": "220"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


async def _invoke(*args: str):
    runner = CliRunner()
    return await anyio.to_thread.run_sync(lambda: runner.invoke(cli, ["dead-letters", *args]))


async def test_list_and_show_name_the_failure(client, clock, publisher, provider, cli_env):
    """list prints the dead letter's error class; show --json carries the ledger history."""
    await exhaust(client, publisher, clock, provider, "r:cli")
    listed = await _invoke("list")
    assert listed.exit_code == 0, listed.output
    assert "smtp_4xx" in listed.output and "r:cli" in listed.output
    as_json = json.loads((await _invoke("list", "--json")).stdout)
    [item] = as_json["items"]
    shown = json.loads((await _invoke("show", str(item["id"]), "--json")).stdout)
    assert shown["send_record"]["state"] == "dead"
    assert shown["redrive"]["message"]["idempotency_key"] == "r:cli:email:v1:r1"
    terminal = json.loads((await _invoke("list", "--terminal", "--json")).stdout)
    assert terminal["terminal_failures"] == []


async def test_dry_run_changes_nothing_and_memory_queue_refuses_a_real_redrive(
    client, clock, publisher, provider, cli_env
):
    """--dry-run prints the plan; without it, a private in-memory queue is refused."""
    await exhaust(client, publisher, clock, provider, "r:cli-dry")
    dry = await _invoke("redrive", "--error-class", "smtp_4xx", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True and report["published"] == 1
    refused = await _invoke("redrive", "--error-class", "smtp_4xx")
    assert refused.exit_code == 2 and "REMINDERS_QUEUE=memory" in refused.output
    assert (await _invoke("redrive")).exit_code == 2  # no target, no filter, no --all
    [record] = (await get_reminder(client, "r:cli-dry"))["send_records"]
    assert record["state"] == "dead"


async def test_redrive_publishes_and_the_message_is_sent(
    client, clock, publisher, provider, settings, cli_env, monkeypatch
):
    """With a queue it can publish to, the CLI redrive ends with the send `sent`."""
    await exhaust(client, publisher, clock, provider, "r:cli-real")
    monkeypatch.setattr(
        cli_module,
        "open_container",
        lambda _settings, *, publish: open_container(settings, clock=clock, publisher=publisher),
    )
    result = await _invoke("redrive", "--all")
    assert result.exit_code == 0, result.output
    assert "published 1" in result.output
    [message] = publisher.drain()
    assert (await push_message(client, message)).json()["outcome"] == "sent"
    [record] = (await get_reminder(client, "r:cli-real"))["send_records"]
    assert record["state"] == "sent" and record["redrive_count"] == 1


async def test_list_is_readable_at_80_columns(
    client, clock, publisher, provider, cli_env, monkeypatch
):
    """At 80 columns the tables drop their least useful columns instead of cutting ids and
    error classes to '…'; --json still carries every field."""
    monkeypatch.setenv("COLUMNS", "80")
    reminder_id = "digest-cust_1842:2026-08-17T09:00"
    await exhaust(client, publisher, clock, provider, reminder_id)
    for args in (("list", "--terminal"), ("stuck",), ("redrive", "--all", "--dry-run")):
        shown = await _invoke(*args)
        assert shown.exit_code == 0, shown.output
        assert max(len(line.rstrip()) for line in shown.stdout.splitlines()) <= 80, shown.stdout
        assert "…" not in shown.output
    listed = (await _invoke("list")).output
    assert reminder_id in listed and "smtp_4xx" in listed
    [item] = json.loads((await _invoke("list", "--json")).stdout)["items"]
    assert item["reminder_id"] == reminder_id and item["queue"] and item["reason"]


async def test_discard_closes_a_quarantined_letter_and_refuses_an_exhausted_one(
    client, clock, publisher, provider, cli_env
):
    """discard closes the malformed letter (listed as discarded after) and exits 1 naming
    why the exhausted send's letter was kept."""
    await exhaust(client, publisher, clock, provider, "r:cli-discard")
    await push(client, {"message_id": "m-cli-bad", "payload": {"v": 9}})
    listed = json.loads((await _invoke("list", "--json")).stdout)["items"]
    ids = {item["reason"]: item["id"] for item in listed}
    bad, dead = ids["malformed"], ids["attempts_exhausted"]

    result = await _invoke("discard", str(bad), str(dead), "--json")
    assert result.exit_code == 1, result.output
    items = {i["dead_letter_id"]: i for i in json.loads(result.stdout)["items"]}
    assert items[bad]["discarded"] and not items[dead]["discarded"]
    assert "redrive it instead" in items[dead]["reason"]
    still_open = json.loads((await _invoke("list", "--json")).stdout)["items"]
    assert [item["id"] for item in still_open] == [dead]
    gone = json.loads((await _invoke("list", "--status", "discarded", "--json")).stdout)["items"]
    assert [item["id"] for item in gone] == [bad] and gone[0]["discarded_at"]
