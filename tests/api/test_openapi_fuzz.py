"""Schemathesis over the OpenAPI schema: no generated request may answer 500, and every
answer conforms to the schema (its status code documented, its body and content type the
documented ones).

The real app serves on a loopback port (tests/support/live_server.py) against this run's
database (SQLite or PostgreSQL, whichever ``--db`` chose). Every operation is fuzzed with
schema-conforming and schema-violating requests, authenticated with the credential its
router requires; a customer ``c1`` exists so that reminder and schedule bodies can reach
the database. Bounded and derandomized: the same examples every run, well under a minute
per database.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from tests.conftest import ADMIN_TOKEN, API_TOKEN, CRON_TOKEN, empty_all_tables, make_settings
from tests.support.live_server import live_server

EXAMPLES_PER_OPERATION = 12
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
CREDENTIAL_BY_SCHEME = {"ApiToken": API_TOKEN, "AdminToken": ADMIN_TOKEN, "CronToken": CRON_TOKEN}


def _fuzz(operation, base_url: str, mode: GenerationMode) -> None:
    # The credential the operation declares (routes with none ignore the header).
    schemes = [name for entry in operation.definition.raw.get("security", []) for name in entry]
    token = CREDENTIAL_BY_SCHEME[schemes[0]] if schemes else API_TOKEN

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case) -> None:
        response = case.call(base_url=base_url, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: "
            f"{response.text[:300]} (body {case.body!r:.300}, query {case.query!r:.200})"
        )
        case.validate_response(response, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        # An operation with nothing declared to violate has no negative cases.
        assert mode is GenerationMode.NEGATIVE, operation.label


@pytest.mark.slow
@pytest.mark.timeout(300)  # ~60 s on a quiet machine; shared CI boxes are slower
def test_no_generated_request_answers_500(database_url, tmp_path):
    """Every operation, positive and negative cases: 2xx or a clear 4xx, never 5xx, each
    answer as the schema documents it."""
    asyncio.run(empty_all_tables(database_url))
    # The lifespan opens the container in the server's own loop (its pools belong there).
    app = create_app(make_settings(database_url, tmp_path, queue="memory"))
    with live_server(app) as base_url:
        http = httpx.Client(base_url=base_url, timeout=10)
        created = http.put(
            "/v1/customers/c1",
            json={"email": "c1@example.com"},
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
        assert created.status_code == 200, created.text
        schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 15, "the schema lost its operations"
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                _fuzz(operation, base_url, mode)
