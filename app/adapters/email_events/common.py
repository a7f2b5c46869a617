"""What every provider's event parser shares: JSON that must be there, instants, addresses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from app.domain.email_events import EventKind, ProviderEvent, clip
from app.domain.errors import MalformedEvent
from app.domain.suppression import try_normalize

MAX_ID_LENGTH = 255


def load_json(body: bytes) -> Any:
    """The body as JSON; ``MalformedEvent`` when it is not."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise MalformedEvent("the body is not JSON") from None


def field(mapping: Any, name: str) -> Any:
    """``mapping[name]`` when ``mapping`` is an object, else ``MalformedEvent``."""
    if not isinstance(mapping, dict):
        raise MalformedEvent(f"expected an object holding {name!r}")
    return mapping.get(name)


def text(value: Any, name: str) -> str:
    """A required non-empty string, bounded to a column."""
    if not isinstance(value, str) or not value:
        raise MalformedEvent(f"{name} must be a non-empty string")
    return value[:MAX_ID_LENGTH]


def instant(value: Any, *, fallback: datetime) -> datetime:
    """An ISO 8601 or Unix-seconds instant as UTC; ``fallback`` when absent or unreadable
    (an event's time is informative: it never makes an authentic event unusable)."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    return fallback


def event(
    provider: str,
    event_id: str,
    kind: EventKind,
    *,
    occurred_at: datetime,
    email: Any,
    message_id: Any,
    detail: Any = None,
) -> ProviderEvent:
    """A ``ProviderEvent`` from loosely typed provider fields."""
    return ProviderEvent(
        provider=provider,
        event_id=event_id[:MAX_ID_LENGTH],
        kind=kind,
        occurred_at=occurred_at,
        email=try_normalize(email),
        message_id=message_id[:MAX_ID_LENGTH] if isinstance(message_id, str) else None,
        detail=clip(detail),
    )
