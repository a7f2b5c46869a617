"""The OpenAPI document as clients see the service: credentials, the real error body, the
push route per queue format and the kinds the templates offer.

FastAPI documents what it can infer. The rest is added here, once, from the routes
themselves: each route's credential check gives its security scheme (so ``/docs`` has a
working Authorize button) and its 401; every error is the body ``errors.py`` writes
(``{"error", "message", "fields"}``), never FastAPI's ``{"detail"}``.

A generated client is named from this document, so the names are chosen: each operation's
id is its route function's name (``put_customer``, ``list_reminders``; unique, checked when
the document is built), each operation is tagged with the one resource it acts on (the
client's modules), and every schema is a named component (no names made from paths).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, Field

from app.adapters.rendering import Renderer

from .batch import BODY_MODELS
from .deps import require_admin_token, require_api_token
from .push import PUSH_PATH, PushAnswer, push_operation

# The resources, in the order /docs lists them; every operation carries exactly one.
TAGS: list[dict[str, str]] = [
    {"name": "customers", "description": "Who reminders go to, and how (API token)."},
    {"name": "reminders", "description": "One-off reminders and their sends (API token)."},
    {"name": "schedules", "description": "Recurring reminders in a time zone (API token)."},
    {"name": "templates", "description": "The kinds of reminder, and previews (API token)."},
    {"name": "sweep", "description": "The cron target: publish due reminders (cron token)."},
    {"name": "dead-letters", "description": "Sends that gave up; redrive (admin token)."},
    {"name": "sends", "description": "The ledger's send records (admin token)."},
    {"name": "queues", "description": "The embedded queue's dead messages (admin token)."},
    {"name": "audit", "description": "The ledger's invariants, checked now (admin token)."},
    {"name": "suppressions", "description": "Addresses no email goes to (admin token)."},
    {"name": "health", "description": "Liveness and readiness probes (no credential)."},
    {"name": "events", "description": "Email providers' delivery events (signed by each)."},
    {"name": "unsubscribe", "description": "The recipient's pages (a signed link)."},
    {"name": "push", "description": "Where the queue delivers (signed per queue format)."},
]

SCHEMES: dict[str, dict[str, str]] = {
    "ApiToken": {"description": "REMINDERS_API_TOKEN: the application's routes"},
    "AdminToken": {"description": "REMINDERS_ADMIN_TOKEN: the operator API"},
    "CronToken": {"description": "REMINDERS_CRON_TOKEN: the cron target"},
}
_SCHEME_OF_CHECK: dict[Callable[..., Any], str] = {
    require_api_token: "ApiToken",
    require_admin_token: "AdminToken",
}
_EXTRA_SCHEME = {"/cron/sweep": "CronToken"}  # the route checks its token itself (or in the body)


class FieldProblem(BaseModel):
    """One wrong field of a request."""

    field: str = Field(description="dotted path (data.x), a parameter's name, or body")
    message: str


class ErrorBody(BaseModel):
    """Every error answer of the service."""

    error: str = Field(description="unauthenticated, not_found, conflict, invalid_input, …")
    message: str
    fields: list[FieldProblem] | None = Field(default=None, description="only on 422")


_ERRORS = {
    "401": "missing or wrong bearer token",
    "404": "no such id",
    "409": "not possible in the current state",
    "413": "body over the size cap",
    "422": "a field or parameter is wrong; fields names each one",
}
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def operation_id(route: APIRoute) -> str:
    """A route's operation id: its function's name (FastAPI's default appends the path)."""
    return route.name


def install_openapi(app: FastAPI) -> None:
    """Serve the completed document as the app's ``/openapi.json`` (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=TAGS,
            )
            complete(schema, app, kinds=_kinds(app))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _kinds(app: FastAPI) -> list[str]:
    container = getattr(app.state, "container", None)
    renderer = container.renderer if container is not None else Renderer()
    return renderer.kinds()


def complete(schema: dict[str, Any], app: FastAPI, *, kinds: list[str]) -> None:
    """Add credentials, error answers, the push route and the known kinds to ``schema``."""
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        name: {"type": "http", "scheme": "bearer", **fields} for name, fields in SCHEMES.items()
    }
    schemas = components.setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    models: tuple[type[BaseModel], ...] = (ErrorBody, PushAnswer, *BODY_MODELS)
    for model in models:
        _add_schemas(schemas, model)
    schema["paths"][PUSH_PATH] = {"post": push_operation()}
    for context in iter_route_contexts(app.routes):  # routes of included routers too
        route = context.route
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in route.methods or ():
                operation = schema["paths"][route.path_format].get(method.lower())
                if operation is not None:
                    _complete_operation(operation, route, method)
    _document_errors(schema["paths"][PUSH_PATH]["post"], ["401", "404", "413"])
    _name_kinds(schemas, schema["paths"], kinds)
    _check_operation_ids(schema["paths"])


def _add_schemas(schemas: dict[str, Any], model: type[BaseModel]) -> None:
    # Replaces FastAPI's serialization-mode copy where a route also answers with the model.
    found = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas |= {model.__name__: found, **found.pop("$defs", {})}


def _check_operation_ids(paths: dict[str, Any]) -> None:
    ids = [operation["operationId"] for item in paths.values() for operation in item.values()]
    if duplicates := sorted({name for name in ids if ids.count(name) > 1}):
        raise RuntimeError(f"operation ids used twice: {', '.join(duplicates)} (rename a route)")


def _complete_operation(operation: dict[str, Any], route: APIRoute, method: str) -> None:
    scheme = _scheme(route)
    codes = ["422"] if route.dependant.path_params or _takes_input(operation) else []
    if scheme is not None:
        operation["security"] = [{scheme: []}]
        codes.append("401")
    if route.dependant.path_params and not route.path.endswith("/preview"):
        # GET: an unknown id; PUT creates, so only a state conflict; the rest both.
        codes += {"GET": ["404"], "PUT": ["409"]}.get(method, ["404", "409"])
    if "requestBody" in operation:
        codes.append("413")
    _document_errors(operation, codes)


def _takes_input(operation: dict[str, Any]) -> bool:
    return bool(operation.get("parameters")) or "requestBody" in operation


def _scheme(route: APIRoute) -> str | None:
    for dependency in route.dependant.dependencies:
        if dependency.call in _SCHEME_OF_CHECK:
            return _SCHEME_OF_CHECK[dependency.call]
    return _EXTRA_SCHEME.get(route.path)


def _document_errors(operation: dict[str, Any], codes: list[str]) -> None:
    responses = operation.setdefault("responses", {})
    for code in codes:
        responses[code] = {
            "description": _ERRORS[code],
            "content": {"application/json": {"schema": _ERROR_REF}},
        }


def _name_kinds(schemas: dict[str, Any], paths: dict[str, Any], kinds: list[str]) -> None:
    # Webhook-only reminders may use any kind, so the list is a description, not an enum.
    note = f"The templates offer: {', '.join(kinds)} (GET /v1/templates)."
    for model in schemas.values():
        kind = model.get("properties", {}).get("kind")
        if kind is not None and "pattern" in kind:
            kind["description"] = note
    for operations in paths.values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "kind":
                    parameter["description"] = note
