"""The OpenAPI document a client generator reads: credentials, typed answers, the real error
body, 201 where routes create, the push route per queue format and the template kinds."""

from __future__ import annotations

import json

import pytest

from app.adapters.rendering import Renderer
from app.main import create_app
from tests.conftest import make_settings
from tests.support.flow import API

ERROR_REF = "#/components/schemas/ErrorBody"
SCHEME_BY_TAG = {
    "customers": "ApiToken",
    "reminders": "ApiToken",
    "schedules": "ApiToken",
    "templates": "ApiToken",
    "sweep": "CronToken",
    "dead-letters": "AdminToken",
    "sends": "AdminToken",
    "queues": "AdminToken",
    "audit": "AdminToken",
    "suppressions": "AdminToken",
}
# The public names a generated client is built from: one per operation, chosen (never
# FastAPI's path-derived default), grouped by the resource they act on.
OPERATIONS = {
    "customers": {
        "put_customer": "PUT /v1/customers/{customer_id}",
        "get_customer": "GET /v1/customers/{customer_id}",
        "resubscribe_customer": "DELETE /v1/customers/{customer_id}/unsubscribes/{channel}",
        "put_customers_batch": "POST /v1/customers:batch",
    },
    "reminders": {
        "put_reminder": "PUT /v1/reminders/{reminder_id}",
        "get_reminder": "GET /v1/reminders/{reminder_id}",
        "cancel_reminder": "DELETE /v1/reminders/{reminder_id}",
        "list_reminders": "GET /v1/reminders",
        "put_reminders_batch": "POST /v1/reminders:batch",
    },
    "schedules": {
        "put_schedule": "PUT /v1/schedules/{schedule_id}",
        "get_schedule": "GET /v1/schedules/{schedule_id}",
        "delete_schedule": "DELETE /v1/schedules/{schedule_id}",
        "list_schedules": "GET /v1/schedules",
        "pause_schedule": "POST /v1/schedules/{schedule_id}/pause",
        "resume_schedule": "POST /v1/schedules/{schedule_id}/resume",
    },
    "templates": {
        "list_templates": "GET /v1/templates",
        "preview_template": "POST /v1/templates/{kind}/preview",
    },
    "sweep": {"run_sweep": "POST /cron/sweep"},
    "dead-letters": {
        "list_dead_letters": "GET /v1/dead-letters",
        "summarize_dead_letters": "GET /v1/dead-letters/summary",
        "redrive_dead_letters": "POST /v1/dead-letters/redrive",
        "get_dead_letter": "GET /v1/dead-letters/{dead_letter_id}",
        "redrive_dead_letter": "POST /v1/dead-letters/{dead_letter_id}/redrive",
    },
    "sends": {
        "list_sends": "GET /v1/sends",
        "redrive_send": "POST /v1/sends/{send_record_id}/redrive",
    },
    "queues": {
        "list_dead_messages": "GET /v1/queues/embedded/dead",
        "redrive_dead_messages": "POST /v1/queues/embedded/dead/redrive",
    },
    "audit": {"get_audit": "GET /v1/audit"},
    "suppressions": {
        "list_suppressions": "GET /v1/suppressions",
        "get_suppression": "GET /v1/suppressions/{email}",
        "put_suppression": "PUT /v1/suppressions/{email}",
        "delete_suppression": "DELETE /v1/suppressions/{email}",
    },
    "health": {"get_health": "GET /healthz", "get_readiness": "GET /readyz"},
    "events": {"receive_email_events": "POST /events/email/{provider}"},
    "unsubscribe": {
        "confirm_unsubscribe": "GET /unsubscribe/{token}",
        "unsubscribe": "POST /unsubscribe/{token}",
    },
    "push": {"receive_push": "POST /push/{queue}"},
}


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    """The document as /openapi.json serves it (no database needed to build it)."""
    tmp = tmp_path_factory.mktemp("openapi")
    app = create_app(make_settings(f"sqlite+aiosqlite:///{tmp}/x.db", tmp))
    return app.openapi()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield f"{method.upper()} {path}", operation


def test_each_credential_is_a_bearer_scheme_on_its_routes(schema):
    """ApiToken, AdminToken and CronToken are HTTP bearer schemes, and each route behind one
    declares it (the Authorize button of /docs) and documents its 401 as the error body."""
    schemes = schema["components"]["securitySchemes"]
    assert {name: s["scheme"] for name, s in schemes.items()} == {
        "ApiToken": "bearer",
        "AdminToken": "bearer",
        "CronToken": "bearer",
    }
    for label, operation in _operations(schema):
        [tag] = operation["tags"]
        expected = SCHEME_BY_TAG.get(tag)
        if expected is None:
            assert "security" not in operation, label
            continue
        assert operation["security"] == [{expected: []}], label
        assert operation["responses"]["401"]["content"]["application/json"]["schema"] == {
            "$ref": ERROR_REF
        }, label


def test_each_operation_has_its_chosen_id_and_one_resource_tag(schema):
    """Operation ids are the chosen verb_noun names (unique, so a generated client has one
    function per operation), each operation carries exactly its resource's tag, and every
    tag is described in the document's tag list, in that order."""
    found: dict[str, dict[str, str]] = {}
    ids = []
    for label, operation in _operations(schema):
        [tag] = operation["tags"]
        found.setdefault(tag, {})[operation["operationId"]] = label
        ids.append(operation["operationId"])
    assert len(ids) == len(set(ids)), sorted(ids)
    # A new route: give it a verb_noun function name and one tag from openapi.TAGS, then
    # add it here (renaming one breaks generated clients).
    assert found == OPERATIONS
    listed = [tag["name"] for tag in schema["tags"]]
    assert listed == list(OPERATIONS)
    assert all(tag["description"] for tag in schema["tags"])


def test_errors_are_our_body_never_fastapis_detail(schema):
    """No HTTPValidationError anywhere; every 4xx answer documented is ErrorBody, and every
    operation taking input documents its 422."""
    assert "HTTPValidationError" not in json.dumps(schema)
    assert set(schema["components"]["schemas"]["ErrorBody"]["properties"]) == {
        "error",
        "message",
        "fields",
    }
    for label, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if status.startswith("4"):
                content = response["content"]["application/json"]["schema"]
                assert content == {"$ref": ERROR_REF}, (label, status)
        if operation.get("parameters") or "requestBody" in operation:
            assert "422" in operation["responses"] or label.startswith("POST /push"), label


def test_creating_routes_document_201_and_lookups_404(schema):
    """PUT of a reminder or schedule documents 201 (created) beside 200; GET by id 404."""
    for path in ("/v1/reminders/{reminder_id}", "/v1/schedules/{schedule_id}"):
        responses = schema["paths"][path]["put"]["responses"]
        assert responses["201"]["content"] == responses["200"]["content"]
        assert "404" in schema["paths"][path]["get"]["responses"]
        assert "409" in schema["paths"][path]["delete"]["responses"]


def test_every_json_answer_is_typed_with_examples(schema):
    """Every route's 200 JSON answer is a named model that carries an example (the HTML
    unsubscribe pages aside)."""
    components = schema["components"]["schemas"]
    for label, operation in _operations(schema):
        if "application/json" not in operation["responses"]["200"].get("content", {}):
            assert "/unsubscribe/" in label, label
            continue
        ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        model = components[ref.rsplit("/", 1)[-1]]
        assert model.get("examples") or model.get("example"), label
    put = components["ReminderPut"]["properties"]
    assert "warnings" in put and "send_records" in put


def test_push_route_is_documented_per_queue_format(schema):
    """POST /push/{queue} is in the document, describing each format's headers and body."""
    push = schema["paths"]["/push/{queue}"]["post"]
    text = push["description"]
    for needle in (
        "X-Infrai-Signature",
        "X-Infrai-Timestamp",
        "X-CloudTasks-TaskName",
        "pubsub, wrapped",
        "pubsub, unwrapped",
        "x-goog-pubsub-message-id",
        "SigningCertURL",
        "Upstash-Signature",
    ):
        assert needle in text, needle
    assert {"200", "401", "404", "413", "503"} <= set(push["responses"])


def test_kinds_from_the_templates_are_named(schema):
    """The kind fields and the preview's kind parameter list the kinds the templates offer."""
    kinds = Renderer().kinds()
    described = schema["components"]["schemas"]["ReminderIn"]["properties"]["kind"]["description"]
    assert all(kind in described for kind in kinds) and kinds
    [param] = schema["paths"]["/v1/templates/{kind}/preview"]["post"]["parameters"]
    assert all(kind in param["description"] for kind in kinds)


@pytest.mark.anyio
async def test_a_body_that_is_not_json_is_a_422_in_our_body(client):
    """FastAPI's own 400 for an unparsable body (found by the conformance run) answers as
    every bad input does: 422 invalid_input naming the body; an unknown path is our 404."""
    response = await client.put(
        "/v1/customers/c1",
        content=b"\xff\x00{",
        headers={**API, "content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_input"
    assert response.json()["fields"] == [{"field": "body", "message": "body: not valid JSON"}]
    missing = await client.get("/v1/nothing-here", headers=API)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
