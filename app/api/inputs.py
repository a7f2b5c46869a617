"""Input types shared by the API's models: text every database stores, instants it can hold.

Each refusal is a 422 naming the field, never a database error: PostgreSQL refuses NUL in
text and JSON, neither database can store a lone surrogate, and an instant whose UTC form
falls outside Python's datetime range (``9999-12-31T23:59:59-14:00``) cannot even be
converted. Instants are limited to a sane window so that date arithmetic downstream (grace
periods, horizons, recurrence look-ahead) never overflows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, field_validator

EARLIEST_INSTANT = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(3000, 1, 1, tzinfo=UTC)


def storable_text(value: str) -> str:
    """The text unchanged; ValueError when a database could not store it."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def _instant(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is outside the representable range of dates") from None
    if not EARLIEST_INSTANT <= utc < LATEST_INSTANT:
        raise ValueError(
            f"must be between {EARLIEST_INSTANT:%Y-%m-%d} and {LATEST_INSTANT:%Y-%m-%d} (UTC)"
        )
    return utc


Text = Annotated[str, AfterValidator(storable_text)]
Instant = Annotated[AwareDatetime, AfterValidator(_instant)]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


class ApiModel(BaseModel):
    """A request body or query model: every string in it, nested ones too, is storable."""

    @field_validator("*")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        for text in _strings(value):
            storable_text(text)
        return value
