"""Input types shared by the API's models: text every database stores, instants it can hold.

Each refusal is a 422 naming the field, never a database error: PostgreSQL refuses NUL in
text and JSON, neither database can store a lone surrogate, and an instant whose UTC form
falls outside Python's datetime range (``9999-12-31T23:59:59-14:00``) cannot even be
converted. Instants are limited to a sane window so that date arithmetic downstream (grace
periods, horizons, recurrence look-ahead) never overflows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

import email_validator
from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, field_validator

EARLIEST_INSTANT = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(3000, 1, 1, tzinfo=UTC)
# ``data`` (reminders, schedules, previews, batch and import items): templates read a few
# shallow fields; deeper or larger documents only cost memory, and past ~250 levels the
# JSON encoders of the answers give up (a stored row 600 deep once answered 500).
MAX_DATA_DEPTH = 32
MAX_DATA_BYTES = 16 * 1024
CUT_MARKER = f"(nested deeper than {MAX_DATA_DEPTH} levels: stored before the limit)"


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


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    return list(value) if isinstance(value, list | tuple) else []


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when containers nest more than ``limit`` deep (a loop: no recursion to overflow)."""
    level, depth = [value], 0
    while level:
        containers = [item for item in level if isinstance(item, dict | list | tuple)]
        if not containers:
            return False
        depth += 1
        if depth > limit:
            return True
        level = [child for item in containers for child in _children(item)]
    return False


def bounded_data(data: dict[str, Any]) -> dict[str, Any]:
    """The one check of ``data`` wherever it is parsed (PUT, batch, import, preview,
    schedules): JSON numbers only, at most MAX_DATA_DEPTH deep and MAX_DATA_BYTES long."""
    if _depth_exceeds(data, MAX_DATA_DEPTH):  # first: the encoder below recurses
        raise ValueError(f"data must nest at most {MAX_DATA_DEPTH} levels deep")
    try:
        encoded = json.dumps(data, allow_nan=False)
    except ValueError:
        raise ValueError("NaN and Infinity are not JSON numbers") from None
    if len(encoded) > MAX_DATA_BYTES:
        raise ValueError(f"data must serialize to at most {MAX_DATA_BYTES} bytes")
    return data


def _cut(value: Any, room: int) -> Any:
    if not isinstance(value, dict | list):
        return value
    if room == 0:
        return CUT_MARKER
    if isinstance(value, dict):
        return {key: _cut(item, room - 1) for key, item in value.items()}
    return [_cut(item, room - 1) for item in value]


def readable_data(data: Any) -> Any:
    """Stored ``data`` as answers show it: rows stored before the depth limit are cut at it
    (the rest unchanged), so reading, listing and cancelling them never fail."""
    if not _depth_exceeds(data, MAX_DATA_DEPTH):
        return data
    return _cut(data, MAX_DATA_DEPTH)


def email_address(value: str) -> str:
    """The address exactly as given, once it is a valid address (IDNA-writable domain).

    Not pydantic's ``EmailStr``: that returns the normalized form, rewriting the ASCII
    ``x@xn--bcher-kva.de`` into ``x@bücher.de``; we store what the customer gave and write
    the domain in ASCII only on the SMTP envelope (``app/domain/addresses.py``).
    """
    try:
        email_validator.validate_email(value, check_deliverability=False)
    except email_validator.EmailNotValidError as error:
        raise ValueError(f"value is not a valid email address: {error}") from None
    return value


Text = Annotated[str, AfterValidator(storable_text)]
EmailAddress = Annotated[str, AfterValidator(email_address)]
Instant = Annotated[AwareDatetime, AfterValidator(_instant)]
SmallData = Annotated[dict[str, Any], AfterValidator(bounded_data)]
StoredData = Annotated[dict[str, Any], BeforeValidator(readable_data)]


def _strings(value: Any) -> Iterator[str]:
    pending = [value]  # a loop, not recursion: nesting depth is checked elsewhere, later
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        else:
            pending.extend(_children(item))


class ApiModel(BaseModel):
    """A request body or query model: every string in it, nested ones too, is storable."""

    @field_validator("*")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        for text in _strings(value):
            storable_text(text)
        return value
