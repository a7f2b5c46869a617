"""Infrai's discovery documents, and whether the requests we send match them.

``reminders check`` (``check``) compares each capability we call with the public
discovery index: listed, available, at our method and path, and each body we send valid
against the published parameter schema. Documented capabilities missing from discovery
fail; ones only seen in client code warn, because their paths are settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from jsonschema import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for

from app.domain.errors import ReminderRelayError

from ..kind import CheckResult, CheckStatus
from .api import InfraiApi, InfraiError

DOCUMENTED = frozenset({"queue.publish", "queue.create", "cron.create", "cron.list"})
_PLACEHOLDER = re.compile(r"\{[^}]*\}|:[A-Za-z_]+")


@dataclass(frozen=True, slots=True)
class SentRequest:
    """A request exactly as we send it (body None for GETs)."""

    capability: str
    method: str
    path: str
    body: dict[str, Any] | None
    label: str
    secret_fields: tuple[str, ...] = ()


class Discovery(Protocol):
    """Where discovery documents come from: Infrai itself, or a recorded file."""

    async def index(self) -> dict[str, Any]:
        """The ``GET /v1/discovery`` document."""
        ...

    async def capability(self, capability: str) -> dict[str, Any]:
        """The ``GET /v1/discovery/{capability}`` document."""
        ...


class HttpDiscovery:
    """Discovery fetched from Infrai (public, no key)."""

    def __init__(self, api: InfraiApi) -> None:
        self._api = api

    async def index(self) -> dict[str, Any]:
        """The live index."""
        return await self._api.fetch_document("discovery", "/discovery")

    async def capability(self, capability: str) -> dict[str, Any]:
        """The live capability document."""
        return await self._api.fetch_document("discovery", f"/discovery/{capability}")


class FileDiscovery:
    """Discovery recorded in a file: ``{"index": {...}, "capabilities": {id: {...}}}``."""

    def __init__(self, path: Path) -> None:
        self._document = json.loads(path.read_text())

    async def index(self) -> dict[str, Any]:
        """The recorded index."""
        return dict(self._document["index"])

    async def capability(self, capability: str) -> dict[str, Any]:
        """The recorded capability document."""
        found = self._document.get("capabilities", {}).get(capability)
        if found is None:
            raise InfraiError(f"no recorded discovery document for {capability}", status=404)
        return dict(found)


async def check_discovery(
    discovery: Discovery, sent: list[SentRequest], *, base_path: str
) -> list[CheckResult]:
    """Each capability we call is published at our method/path and accepts our bodies."""
    try:
        index = await discovery.index()
    except ReminderRelayError as error:
        return [CheckResult("discovery", "fail", str(error))]
    listed = {str(c.get("id")): c for c in index.get("capabilities", []) if isinstance(c, dict)}
    results = [
        CheckResult(
            "discovery", "pass", f"version {index.get('version')}, {len(listed)} capabilities"
        )
    ]
    for capability in dict.fromkeys(request.capability for request in sent):
        requests = [r for r in sent if r.capability == capability]
        results.extend(await _check_capability(discovery, listed, requests, base_path))
    return results


async def _check_capability(
    discovery: Discovery,
    listed: dict[str, dict[str, Any]],
    requests: list[SentRequest],
    base_path: str,
) -> list[CheckResult]:
    capability = requests[0].capability
    entry = listed.get(capability)
    if entry is None:
        status: CheckStatus = "fail" if capability in DOCUMENTED else "warn"
        path = base_path + requests[0].path
        return [CheckResult(capability, status, f"not in discovery (we call {path})")]
    if entry.get("available") is False:
        return [CheckResult(capability, "fail", "listed as unavailable")]
    problem = _route_mismatch(entry, requests[0], base_path)
    if problem:
        return [CheckResult(capability, "fail", problem)]
    try:
        document = await discovery.capability(capability)
    except ReminderRelayError as error:
        return [CheckResult(capability, "fail", f"no discovery document: {error}")]
    schema = parameter_schema(document.get("parameters"))
    return [_validate(capability, schema, r) for r in requests if r.body is not None] or [
        CheckResult(capability, "pass", f"{entry.get('method')} {entry.get('path')}")
    ]


def _route_mismatch(entry: dict[str, Any], request: SentRequest, base_path: str) -> str | None:
    ours = _PLACEHOLDER.sub("{}", base_path + request.path)
    theirs = _PLACEHOLDER.sub("{}", str(entry.get("path", "")))
    method = str(entry.get("method", request.method)).upper()
    if ours != theirs or method != request.method:
        return (
            f"published as {method} {entry.get('path')}, we call {request.method} "
            f"{base_path + request.path} (adjust the REMINDERS_INFRAI_*_PATH setting)"
        )
    return None


def parameter_schema(parameters: Any) -> dict[str, Any]:
    """A JSON Schema from ``parameters``: a schema already, or a list of named parameters."""
    if isinstance(parameters, dict) and (
        "type" in parameters or "properties" in parameters or "$schema" in parameters
    ):
        return parameters
    if isinstance(parameters, list):
        body = [p for p in parameters if isinstance(p, dict) and p.get("in", "body") == "body"]
        return {
            "type": "object",
            "properties": {
                str(p["name"]): p.get("schema") or {k: v for k, v in p.items() if k == "type"}
                for p in body
                if p.get("name")
            },
            "required": [str(p["name"]) for p in body if p.get("required") and p.get("name")],
        }
    return {"type": "object"}


def _validate(capability: str, schema: dict[str, Any], request: SentRequest) -> CheckResult:
    name = f"{capability} ({request.label})"
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as error:
        return CheckResult(name, "fail", f"published schema is not valid: {error.message}")
    errors = sorted(cls(schema).iter_errors(request.body), key=lambda e: list(e.path))
    if not errors:
        return CheckResult(name, "pass", "our body matches the published schema")
    secrets = _secret_values(request.body, request.secret_fields)
    return CheckResult(name, "fail", "; ".join(_describe(e, secrets) for e in errors))


def _secret_values(body: Any, names: Iterable[str]) -> list[str]:
    names = set(names)
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in names and isinstance(value, str) and value:
                found.append(value)
            found.extend(_secret_values(value, names))
    return found


def _describe(error: Any, secrets: list[str]) -> str:
    where = "/".join(str(part) for part in error.path) or "(body)"
    if any(secret in error.message for secret in secrets):
        # jsonschema messages quote the offending value; never print a secret.
        return f"{where}: fails {error.validator} {error.validator_value!r}"
    return f"{where}: {error.message}"


def base_path(base_url: str) -> str:
    """The path part of the base URL (``/v1``), which discovery paths include."""
    return urlparse(base_url).path.rstrip("/")
