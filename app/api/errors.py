"""Map the error root to HTTP, once. Every error body is ``{"error": code, "message": ...}``,
except under a path served to browsers (the admin page, ``serve_html_errors``): the same
status and message as an HTML page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from app.domain import errors

_STATUS: list[tuple[type[errors.ReminderRelayError], int, str]] = [
    (errors.NotFound, 404, "not_found"),
    (errors.Conflict, 409, "conflict"),
    (errors.InvalidInput, 422, "invalid_input"),
    (errors.Unauthenticated, 401, "unauthenticated"),
    (errors.TooManyFailedAttempts, 429, "too_many_attempts"),
    (errors.PayloadTooLarge, 413, "payload_too_large"),
    (errors.RequestTimedOut, 408, "request_timeout"),
    (errors.MalformedEvent, 400, "malformed_event"),
    (errors.AuthenticationUnavailable, 503, "authentication_unavailable"),
    (errors.LedgerUnavailable, 503, "database_unavailable"),
    (errors.PublishError, 502, "queue_unavailable"),
    (errors.ConfigError, 500, "misconfigured"),
]


# An HTML error page: (request, status, message) -> the page (``serve_html_errors``).
HtmlErrorPage = Callable[[Request, int, str], Response]


def serve_html_errors(app: FastAPI, prefix: str, page: HtmlErrorPage) -> None:
    """Errors of requests under ``prefix`` answer ``page`` (same status) instead of JSON."""
    pages: dict[str, HtmlErrorPage] = getattr(app.state, "html_error_pages", {})
    app.state.html_error_pages = pages | {prefix: page}


def _html_page(request: Request) -> HtmlErrorPage | None:
    pages: dict[str, HtmlErrorPage] = getattr(request.app.state, "html_error_pages", {})
    path = request.url.path
    for prefix, page in pages.items():
        if path == prefix or path.startswith(prefix + "/"):
            return page
    return None


def _answer(
    request: Request | None, body: dict[str, Any], status: int, headers: Mapping[str, str] | None
) -> Response:
    page = _html_page(request) if request is not None else None
    if page is None:
        return JSONResponse(body, status_code=status, headers=headers)
    response = page(request, status, str(body["message"]))  # type: ignore[arg-type]
    response.headers.update(headers or {})
    return response


def error_response(error: errors.ReminderRelayError, request: Request | None = None) -> Response:
    """The HTTP answer for one of our errors (HTML for a ``request`` under a browser path)."""
    for kind, status, code in _STATUS:
        if isinstance(error, kind):
            body: dict[str, Any] = {"error": code, "message": str(error)}
            if isinstance(error, errors.InvalidInput):
                body["fields"] = [{"field": error.field, "message": str(error)}]
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            if status == 503:
                headers = {"Retry-After": "60"}
            if isinstance(error, errors.TooManyFailedAttempts):
                headers = {"Retry-After": str(max(1, math.ceil(error.retry_after)))}
            return _answer(request, body, status, headers)
    return _answer(request, {"error": "internal", "message": "internal error"}, 500, None)


def field_name(location: tuple[Any, ...]) -> str:
    """A validation error's location as the ``field`` of an error body (``data.x``)."""
    parts = [str(part) for part in location if part not in ("body", "path", "query")]
    return ".".join(parts) or "body"


async def _on_our_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, errors.ReminderRelayError)
    return error_response(error, request)


async def _on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    fields = [
        {"field": field_name(tuple(item["loc"])), "message": item["msg"]} for item in error.errors()
    ]
    message = "; ".join(f"{item['field']}: {item['message']}" for item in fields)
    return _answer(
        request, {"error": "invalid_input", "message": message, "fields": fields}, 422, None
    )


_FRAMEWORK_CODES = {404: "not_found", 405: "method_not_allowed"}


async def _on_framework_error(request: Request, error: Exception) -> Response:
    # The framework's own refusals in our body: a body that is not JSON at all (FastAPI's
    # 400 "error parsing the body") is bad input like any other, so 422 naming the body.
    assert isinstance(error, HTTPException)
    if error.status_code == 400:
        return error_response(errors.InvalidInput("body", "not valid JSON"), request)
    code = _FRAMEWORK_CODES.get(error.status_code, "http_error")
    body = {"error": code, "message": str(error.detail)}
    return _answer(request, body, error.status_code, error.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the mappings on an app."""
    app.add_exception_handler(errors.ReminderRelayError, _on_our_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(HTTPException, _on_framework_error)
