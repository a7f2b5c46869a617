"""A client generated from the served ``/openapi.json`` reads well and works.

openapi-python-client (the [test] extra) generates a package from the document the live
server serves, offline (from a file, nothing fetched); the test imports it and registers a
customer and a reminder through it, then reads them back, against the real app on this
run's database. Its modules and functions are named by the document's tags and operation
ids (``api.customers.put_customer``), its models by the document's schema names.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import json
import re
import subprocess
import sys
from datetime import UTC, datetime

import httpx
import pytest

from app.main import create_app
from tests.conftest import API_TOKEN, empty_all_tables, make_settings
from tests.support.live_server import live_server

PACKAGE = "reminder_relay_client"
LONGEST_NAME = 40


@pytest.fixture(scope="module")
def served(database_url, tmp_path_factory):
    """The real app on a loopback port with an empty database: (base URL, its document)."""
    asyncio.run(empty_all_tables(database_url))
    tmp = tmp_path_factory.mktemp("served")
    app = create_app(make_settings(database_url, tmp, queue="memory"))
    with live_server(app) as base_url:
        document = httpx.get(f"{base_url}/openapi.json", timeout=10).raise_for_status().json()
        yield base_url, document


@pytest.fixture(scope="module")
def generated(served, tmp_path_factory):
    """The generated package, imported, and what the generator printed."""
    _, document = served
    tmp = tmp_path_factory.mktemp("generated")
    spec = tmp / "openapi.json"
    spec.write_text(json.dumps(document))
    config = tmp / "generator.yaml"
    config.write_text("post_hooks: []\n")  # no formatter run: ruff need not be on PATH
    command = [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec)]
    command += ["--meta", "none", "--config", str(config), "--output-path", str(tmp / PACKAGE)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(tmp))
    try:
        yield importlib.import_module(PACKAGE), run.stdout + run.stderr
    finally:
        sys.path.remove(str(tmp))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def test_the_generator_reads_every_operation_but_the_push_body(generated):
    """The one construct the generator skips is the push route's text/plain body (SNS
    posts text/plain; no client calls the push route): everything else is generated."""
    _, output = generated
    assert re.findall(r"WARNING parsing (\S+ \S+)", output) == ["POST /push/{queue}"], output


def test_models_and_modules_have_short_names(generated, served):
    """Every model the client defines, and every schema of the document, is named in at
    most 40 characters (FastAPI's defaults gave names of 90, made from route paths); the
    functions live in one module per resource, named by operation id."""
    _, document = served
    models = _module("models")
    names = [*models.__all__, *document["components"]["schemas"]]
    assert [name for name in names if len(name) > LONGEST_NAME] == []
    assert {"CustomerIn", "CustomerBatch", "ReminderIn", "ErrorBody"} <= set(models.__all__)
    # One enum per concept, shared by every model: no two enums hold the same values (an
    # inline Literal gave one copy per field: ReminderInChannelsItem, ReminderOutChannelsItem).
    defined = {name: getattr(models, name) for name in models.__all__}
    values = {
        name: frozenset(member.value for member in kind)
        for name, kind in defined.items()
        if isinstance(kind, type) and issubclass(kind, enum.Enum)
    }
    assert {"Channel", "ReminderState", "ScheduleState", "SendState"} <= set(values)
    assert len(set(values.values())) == len(values), sorted(values)
    assert callable(_module("api.customers.put_customer").sync_detailed)
    assert callable(_module("api.dead_letters.redrive_dead_letters").sync_detailed)


def test_the_client_registers_a_customer_and_a_reminder(generated, served):
    """Through the generated functions: PUT a customer (200) and a reminder (201), read both
    back, find the reminder in the customer's list; an unknown id parses as ErrorBody."""
    package, _ = generated
    base_url, _ = served
    models = _module("models")
    put_customer, get_customer = _module("api.customers.put_customer", "api.customers.get_customer")
    put_reminder, get_reminder, list_reminders = _module(
        "api.reminders.put_reminder", "api.reminders.get_reminder", "api.reminders.list_reminders"
    )
    with package.AuthenticatedClient(base_url=base_url, token=API_TOKEN) as client:
        body = models.CustomerIn(email="ada@example.com", time_zone="Europe/Paris")
        created = put_customer.sync_detailed("cust_gen", client=client, body=body)
        assert created.status_code == 200, created.content
        assert created.parsed.email == "ada@example.com"
        read = get_customer.sync("cust_gen", client=client)
        assert isinstance(read, models.CustomerOut)
        assert (read.id, read.time_zone) == ("cust_gen", "Europe/Paris")

        reminder = models.ReminderIn(
            customer_id="cust_gen",
            kind="renewal",
            due_at=datetime(2030, 1, 1, 9, tzinfo=UTC),
            channels=[models.Channel.EMAIL],
            data=models.ReminderInData.from_dict({"plan": "Pro", "renews_on": "2030-02-01"}),
        )
        put = put_reminder.sync_detailed("renewal:cust_gen:2030", client=client, body=reminder)
        assert put.status_code == 201, put.content
        assert isinstance(put.parsed, models.ReminderPut)
        shown = get_reminder.sync("renewal:cust_gen:2030", client=client)
        assert isinstance(shown, models.ReminderOut)
        assert (shown.customer_id, shown.kind) == ("cust_gen", "renewal")
        assert shown.state is models.ReminderState.SCHEDULED
        assert shown.channels == [models.Channel.EMAIL]
        assert shown.data.to_dict() == {"plan": "Pro", "renews_on": "2030-02-01"}
        page = list_reminders.sync(client=client, customer_id="cust_gen")
        assert [item.id for item in page.items] == ["renewal:cust_gen:2030"]

        missing = get_customer.sync("cust_nobody", client=client)
        assert isinstance(missing, models.ErrorBody) and missing.error == "not_found"


def _module(*names: str):
    """The generated package's module(s) by dotted name below the package."""
    found = [importlib.import_module(f"{PACKAGE}.{name}") for name in names]
    return found[0] if len(found) == 1 else found
