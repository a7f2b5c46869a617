"""What registering one item of a batch did: the vocabulary shared by the batch routes,
the single PUTs and ``reminders import``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .errors import Conflict, InvalidInput, ReminderRelayError


class ItemStatus(StrEnum):
    """What registering one item did."""

    CREATED = "created"  # a new row
    UPDATED = "updated"  # an existing row changed
    UNCHANGED = "unchanged"  # the row already said exactly this: nothing written
    ERROR = "error"  # refused; nothing written for this item, the others are unaffected


@dataclass(frozen=True, slots=True)
class FieldError:
    """One field's problem, as the API reports it."""

    field: str
    message: str


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The outcome of one item of a batch."""

    id: str
    status: ItemStatus
    error: str | None = None  # the error code a single PUT would answer with
    fields: tuple[FieldError, ...] = ()
    # The refusal itself, which a single PUT raises (not part of the JSON).
    failure: ReminderRelayError | None = None

    @classmethod
    def refused(cls, item_id: str, failure: ReminderRelayError) -> ItemResult:
        """An error result carrying the same code and fields as the PUT's error body."""
        if isinstance(failure, InvalidInput):
            field = FieldError(failure.field, str(failure))
            return cls(item_id, ItemStatus.ERROR, "invalid_input", (field,), failure)
        code = "conflict" if isinstance(failure, Conflict) else "invalid_input"
        return cls(item_id, ItemStatus.ERROR, code, (FieldError("id", str(failure)),), failure)

    @classmethod
    def invalid(cls, item_id: str, fields: Sequence[FieldError]) -> ItemResult:
        """An item whose body failed validation, with every field's problem."""
        return cls(item_id, ItemStatus.ERROR, "invalid_input", tuple(fields))

    def raise_refusal(self) -> None:
        """A single PUT answers its item's refusal as the error it is."""
        if self.failure is not None:
            raise self.failure

    def to_json(self) -> dict[str, Any]:
        """The result as the batch routes return it."""
        body: dict[str, Any] = {"id": self.id, "status": self.status.value}
        if self.status is ItemStatus.ERROR:
            body["error"] = self.error
            body["fields"] = [{"field": f.field, "message": f.message} for f in self.fields]
        return body


Items = Sequence[tuple[str, Any]]  # (id, what to register), in the batch's order


def first_of_each(items: Items) -> dict[str, Any]:
    """The items by id, the first occurrence of a repeated id only."""
    unique: dict[str, Any] = {}
    for item_id, values in items:
        unique.setdefault(item_id, values)
    return unique


def in_batch_order(items: Items, by_id: dict[str, ItemResult]) -> list[ItemResult]:
    """One result per item, in the batch's order; a repeated id is refused after its first."""
    results, seen = [], set()
    for item_id, _ in items:
        if item_id in seen:
            failure = InvalidInput("id", "appears more than once in this batch")
            results.append(ItemResult.refused(item_id, failure))
        else:
            seen.add(item_id)
            results.append(by_id[item_id])
    return results
