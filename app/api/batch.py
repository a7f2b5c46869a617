"""Bulk registration: ``POST /v1/customers:batch`` and ``POST /v1/reminders:batch``.

Up to 1,000 items per call, each ``{"id": ..., <the PUT body>}`` and each handled exactly as
its own PUT would be, with one result per item: ``created``, ``updated``, ``unchanged`` or
``error`` (with the error code and field errors the PUT would answer). One bad item never
fails the others. The caller is authenticated before a byte of the body is read, and the
body is capped (413) before it is parsed.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.domain.errors import InvalidInput, ReminderRelayError
from app.domain.registration import FieldError, ItemResult, ItemStatus
from app.services import registration

from .answers import ReminderWarning
from .deps import ContainerDep, read_capped, require_api_token
from .errors import field_name
from .reminders import (
    ID_PATTERN,
    CustomerIn,
    ReminderIn,
    customer_fields,
    reminder_values,
    reminder_warnings,
    webhook_refusals,
)

router = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)])

MAX_BATCH_ITEMS = 1000
# 1,000 items of a few hundred bytes each fit many times over; a batch whose items carry
# large ``data`` must be split into smaller batches.
MAX_BATCH_BYTES = 8 * 1024 * 1024
ItemId = Annotated[str, Field(pattern=ID_PATTERN, max_length=200)]


class CustomerItem(CustomerIn):
    """One item of a customers batch: the customer's id and its PUT body."""

    id: ItemId


class ReminderItem(ReminderIn):
    """One item of a reminders batch: the reminder's id and its PUT body."""

    id: ItemId


class CustomerBatch(BaseModel):
    """The body of ``POST /v1/customers:batch``."""

    model_config = ConfigDict(extra="forbid")
    items: list[CustomerItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class ReminderBatch(BaseModel):
    """The body of ``POST /v1/reminders:batch``."""

    model_config = ConfigDict(extra="forbid")
    items: list[ReminderItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class BatchResult(BaseModel):
    """One item's outcome."""

    id: str
    status: ItemStatus
    error: str | None = None
    fields: list[dict[str, str]] | None = None
    warnings: list[ReminderWarning] | None = Field(
        default=None, description="as a single PUT's warnings (reminders only, when any)"
    )


class BatchAnswer(BaseModel):
    """One result per item, in the order sent, and how many of each status."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {"id": "r1", "status": "created"},
                        {
                            "id": "r2",
                            "status": "error",
                            "error": "invalid_input",
                            "fields": [{"field": "customer_id", "message": "no customer 'c9'"}],
                        },
                    ],
                    "counts": {"created": 1, "updated": 0, "unchanged": 0, "error": 1},
                }
            ]
        }
    )

    results: list[BatchResult]
    counts: dict[str, int]


# The bodies the routes read themselves (after authentication), so FastAPI cannot infer
# them: documented by reference, their schemas added to the document's components by
# openapi.py (a generated client then names them CustomerBatch, not after the route).
BODY_MODELS: tuple[type[BaseModel], ...] = (CustomerBatch, ReminderBatch)


def _documented_body(model: type[BaseModel]) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


async def _read_items(request: Request) -> list[Any]:
    raw = await read_capped(request, MAX_BATCH_BYTES)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidInput("body", "not valid JSON") from None
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list) or not items:
        raise InvalidInput("items", "give a non-empty list of items")
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidInput("items", f"at most {MAX_BATCH_ITEMS} items per batch")
    return items


def validate_items(
    raw_items: Sequence[Any], model: type[BaseModel], prepare: Callable[[Any], dict[str, Any]]
) -> tuple[list[tuple[str, dict[str, Any]]], dict[int, ItemResult]]:
    """Valid items as (id, values), and a result for each invalid one by its position."""
    valid, invalid = [], {}
    for index, raw in enumerate(raw_items):
        item_id = str(raw.get("id", "")) if isinstance(raw, dict) else ""
        try:
            item = model.model_validate(raw)
            values = prepare(item)
        except ValidationError as failure:
            problems = [
                FieldError(field_name(tuple(error["loc"])), error["msg"])
                for error in failure.errors()
            ]
            invalid[index] = ItemResult.invalid(item_id, problems)
            continue
        except ReminderRelayError as failure:
            invalid[index] = ItemResult.refused(item_id, failure)
            continue
        valid.append((item_id, values))
    return valid, invalid


def item_validator(
    knows_kind: Callable[[str], bool],
) -> Callable[[str, Sequence[Any]], tuple[list[tuple[str, dict[str, Any]]], dict[int, ItemResult]]]:
    """``validate(kind, raw items)`` for ``customer`` and ``reminder`` items, exactly as the
    batch routes validate them (``reminders import`` reads its lines through it)."""
    known = functools.cache(knows_kind)  # the template lookup once per kind

    def validate(kind: str, raw_items: Sequence[Any]) -> tuple[list, dict[int, ItemResult]]:
        if kind == "customer":
            return validate_items(raw_items, CustomerItem, customer_fields)
        return validate_items(raw_items, ReminderItem, lambda item: reminder_values(item, known))

    return validate


def _answer(
    raw_items: Sequence[Any],
    invalid: dict[int, ItemResult],
    done: list[ItemResult],
    warnings: dict[str, list[dict[str, str]]],
) -> dict[str, Any]:
    stored = iter(done)
    results = [invalid.get(index) or next(stored) for index in range(len(raw_items))]
    counts = Counter(result.status.value for result in results)
    return {
        "results": [_result_json(result, warnings) for result in results],
        "counts": {status.value: counts[status.value] for status in ItemStatus},
    }


def _result_json(result: ItemResult, warnings: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    body = result.to_json()
    if result.status is not ItemStatus.ERROR and warnings.get(result.id):
        body["warnings"] = warnings[result.id]
    return body


async def _refuse_unreachable_webhooks(
    container: ContainerDep, valid: list[tuple[str, dict[str, Any]]], invalid: dict[int, ItemResult]
) -> list[tuple[str, dict[str, Any]]]:
    # Customers whose webhook_url the SSRF guard refuses become errors at their position
    # (the valid items fill, in order, the positions that are not invalid).
    refusals = await webhook_refusals(container, (v.get("webhook_url") for _, v in valid))
    if not refusals:
        return valid
    positions = (index for index in itertools.count() if index not in invalid)
    kept = []
    for position, (item_id, values) in zip(positions, valid, strict=False):
        if reason := refusals.get(values.get("webhook_url") or ""):
            invalid[position] = ItemResult.refused(item_id, InvalidInput("webhook_url", reason))
        else:
            kept.append((item_id, values))
    return kept


async def _register(request: Request, container: ContainerDep, kind: str) -> Response:
    raw_items = await _read_items(request)
    valid, invalid = item_validator(container.renderer.knows_kind)(kind, raw_items)
    if kind == "customer":  # before the transaction: the guard may resolve host names
        valid = await _refuse_unreachable_webhooks(container, valid, invalid)
    now = container.clock()
    async with container.engine.begin() as conn:
        done = await registration.put_items(conn, kind, valid, now=now)
    warnings = {}
    if kind == "reminder":
        warnings = {rid: reminder_warnings(values, container, now=now) for rid, values in valid}
    answer = _answer(raw_items, invalid, done, warnings)
    return Response(orjson.dumps(answer), media_type="application/json")


@router.post(
    "/customers:batch",
    tags=["customers"],
    response_class=JSONResponse,
    responses={200: {"model": BatchAnswer}},
    openapi_extra=_documented_body(CustomerBatch),
)
async def put_customers_batch(request: Request, container: ContainerDep) -> Response:
    """Create or replace up to 1,000 customers, each as its own PUT would."""
    return await _register(request, container, "customer")


@router.post(
    "/reminders:batch",
    tags=["reminders"],
    response_class=JSONResponse,
    responses={200: {"model": BatchAnswer}},
    openapi_extra=_documented_body(ReminderBatch),
)
async def put_reminders_batch(request: Request, container: ContainerDep) -> Response:
    """Create or update up to 1,000 reminders, each as its own PUT would."""
    return await _register(request, container, "reminder")
