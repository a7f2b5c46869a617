"""``/admin``: the operator's page. Server-rendered, protected by the admin credential.

Login exchanges ``ADMIN_TOKEN`` for a signed, HttpOnly, Secure, SameSite=Strict cookie.
Every POST carries a CSRF token. A redrive is two steps: the preview runs the dry run
and shows exactly what would be published; only its confirm button publishes. A discard
(of a quarantined letter no redrive can publish) is one step: it deletes nothing, the
letter only leaves the open set.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app.domain.errors import NotFound, TooManyFailedAttempts, Unauthenticated
from app.domain.redrive import DeadLetterFilter, format_age
from app.services import activity, admin_sessions, dead_letters, discard, failover, operations

from ..dead_letters import redrive_context
from ..deps import (
    Container,
    failed_check,
    get_container,
    read_capped,
    refuse_if_throttled,
    token_matches,
)
from . import chart, session

router = APIRouter(prefix="/admin", include_in_schema=False)
HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["age"] = format_age
MAX_FORM_BYTES = 8 * 1024
REFRESH_SECONDS = 5
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 25, 100
_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; form-action 'self'",
}


class CsrfRejected(Unauthenticated):
    """The form's CSRF token is missing or wrong: reload the page and try again."""


async def _form(request: Request) -> dict[str, str]:
    body = await read_capped(request, MAX_FORM_BYTES)
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in parsed.items()}


async def _session(request: Request, container: Container) -> session.Session | None:
    settings = container.settings
    current = session.read_session(
        request.cookies.get(session.COOKIE_NAME),
        settings.admin_token,
        now=container.clock().timestamp(),
        max_age=settings.admin_session_seconds,
    )
    if current is None:
        return None
    async with container.engine.connect() as conn:
        revoked = await admin_sessions.is_revoked(conn, current.session_id)
    return None if revoked else current


def _render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    response = templates.TemplateResponse(request, name, context, status_code=status)
    response.headers.update(_SECURITY_HEADERS)
    return response


# Status -> (title, what to do), for the error pages a browser gets instead of JSON.
_ERROR_PAGES = {
    401: ("Not signed in, or the form expired", "Sign in again, then retry from the page."),
    404: ("Not found", "It may have been redriven, discarded or purged since the page loaded."),
    409: ("Not possible now", "The page you came from was out of date; reload it."),
    422: (
        "Bad request",
        "A link or form value is not one this page gave out; start again from the overview.",
    ),
    429: ("Too many attempts", "Wait a little before trying again."),
    502: ("The queue refused", "Nothing was published; try again later."),
    503: ("Temporarily unavailable", "The database is not answering; try again shortly."),
}


def error_page(request: Request, status: int, message: str) -> Response:
    """An error of an admin route as a page (the API answers the same error in JSON)."""
    title, hint = _ERROR_PAGES.get(status, ("Something went wrong", "Try again from the overview."))
    back, back_text = (
        ("/admin/login", "Sign in") if status == 401 else ("/admin", "Back to the overview")
    )
    context = {"status": status, "title": title, "hint": hint, "message": message}
    return _render(request, "error.html", context | {"back": back, "back_text": back_text}, status)


def _to_login() -> Response:
    return RedirectResponse("/admin/login", status_code=303)


@router.get("/login")
async def login_form(request: Request) -> Response:
    """The login form."""
    return _render(request, "login.html", {"error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    """Exchange the admin token for a session cookie."""
    container = get_container(request)
    refuse_if_throttled(request, container, "admin_login")
    form = await _form(request)
    if not token_matches(form.get("token"), container.settings.admin_token):
        refusal = failed_check(request, container, "admin_login", "not the admin token")
        if isinstance(refusal, TooManyFailedAttempts):
            raise refusal
        return _render(request, "login.html", {"error": "That is not the admin token."}, 401)
    value = session.issue_session(container.settings.admin_token, now=container.clock().timestamp())
    response = RedirectResponse("/admin", status_code=303)
    response.set_cookie(
        session.COOKIE_NAME,
        value,
        max_age=int(container.settings.admin_session_seconds),
        path=session.COOKIE_PATH,
        secure=True,
        httponly=True,
        samesite="strict",
    )
    return response


async def _checked_post(
    request: Request,
) -> tuple[Container, session.Session, dict[str, str]] | None:
    container = get_container(request)
    current = await _session(request, container)
    if current is None:
        return None
    form = await _form(request)
    token = container.settings.admin_token
    if not session.csrf_is_valid(form.get("csrf"), token, current.value):
        raise CsrfRejected()
    return container, current, form


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session: its id is revoked, so no copy of the cookie works any more."""
    checked = await _checked_post(request)
    if checked is None:
        return _to_login()
    container, current, _ = checked
    expires_at = datetime.fromtimestamp(
        current.issued + container.settings.admin_session_seconds, UTC
    )
    async with container.engine.begin() as conn:
        await admin_sessions.revoke(
            conn, current.session_id, expires_at=expires_at, now=container.clock()
        )
    response = _to_login()
    response.delete_cookie(session.COOKIE_NAME, path=session.COOKIE_PATH)
    return response


PageSize = Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="rows per page")]


def _links(letters: str | None, sends: str | None, n: int, context: dict[str, Any]) -> dict:
    """The live region's own URL and the paging links, each keeping the other cursor."""

    def url(path: str, **params: str | int | None) -> str:
        kept = {k: v for k, v in params.items() if v not in (None, "")}
        return f"{path}?{urlencode(kept)}" if kept else path

    return {
        "live": url("/admin/live", letters=letters, sends=sends, n=n),
        "letters_next": context["dead_letters_next"]
        and url("/admin", letters=context["dead_letters_next"], sends=sends, n=n),
        "letters_first": letters and url("/admin", sends=sends, n=n),
        "sends_next": context["recent_sends_next"]
        and url("/admin", letters=letters, sends=context["recent_sends_next"], n=n),
        "sends_first": sends and url("/admin", letters=letters, n=n),
    }


async def _live_context(
    request: Request, letters: str | None, sends: str | None, n: int
) -> tuple[Container, dict[str, Any]] | None:
    """What the self-refreshing region shows: figures, chart, one page of each listing
    (None without a valid session)."""
    container = get_container(request)
    current = await _session(request, container)
    if current is None:
        return None
    now = container.clock()
    metrics = container.ledger_metrics  # its last audit: the page never runs one itself
    async with container.engine.connect() as conn:
        context = await operations.overview(
            conn, now=now, limit=n, letters_cursor=letters, sends_cursor=sends,
            audit=metrics.snapshot.audit, audit_age_seconds=metrics.age_seconds(),
        )  # fmt: skip
    return container, context | {
        "chart": chart.stacked_bars(context["hourly"].starts, context["hourly"].series),
        "csrf": session.csrf_token(container.settings.admin_token, current.value),
        "links": _links(letters, sends, n, context),
        "refresh_ms": REFRESH_SECONDS * 1000,
        "circuits": failover.circuit_states(container.receiver),
    }


@router.get("")
async def index(
    request: Request,
    reminder: str | None = None,
    letters: str | None = None,
    sends: str | None = None,
    n: PageSize = DEFAULT_PAGE_SIZE,
) -> Response:
    """The live region (figures, chart, dead letters, sends) and the reminder lookup."""
    live = await _live_context(request, letters, sends, n)
    if live is None:
        return _to_login()
    container, context = live
    term = activity.search_term(reminder)
    found, matches = None, []
    if term is not None:
        async with container.engine.connect() as conn:
            found = await operations.lookup_reminder(conn, term, now=context["now"])
            matches = [] if found else await activity.find_reminders(conn, term)
    context |= {"lookup": reminder, "found": found, "matches": matches}
    return _render(request, "index.html", context)


@router.get("/live")
async def live(
    request: Request,
    letters: str | None = None,
    sends: str | None = None,
    n: PageSize = DEFAULT_PAGE_SIZE,
) -> Response:
    """The live region alone: what the page's script swaps in every few seconds."""
    live = await _live_context(request, letters, sends, n)
    if live is None:
        return _to_login()
    return _render(request, "_live.html", live[1])


@router.get("/static/live.js")
async def live_script() -> Response:
    """The few lines of JavaScript that keep the page alive (served here: no CDN)."""
    return FileResponse(STATIC / "live.js", media_type="text/javascript", headers=_SECURITY_HEADERS)


async def _redrive(container: Container, form: dict[str, str], *, dry_run: bool) -> Any:
    ctx = redrive_context(container)
    target, ident = form.get("target"), dead_letters.parse_row_id(form.get("id", ""))
    if target == "dead_letter" and ident is not None:
        return await dead_letters.redrive_dead_letter(ctx, ident, dry_run=dry_run)
    if target == "send" and ident is not None:
        return await dead_letters.redrive_send(ctx, ident, dry_run=dry_run)
    if target == "group":
        filters = DeadLetterFilter(
            reason=form.get("reason") or None, error_class=form.get("error_class") or None
        )
        return await dead_letters.redrive_dead_letters(ctx, filters, dry_run=dry_run)
    raise NotFound("nothing to redrive: unknown target")


@router.post("/redrive/preview")
async def redrive_preview(request: Request) -> Response:
    """Run the dry run and ask for confirmation."""
    checked = await _checked_post(request)
    if checked is None:
        return _to_login()
    container, current, form = checked
    report = await _redrive(container, form, dry_run=True)
    context = {
        "report": report.to_json(),
        "form": {k: v for k, v in form.items() if k != "csrf"},
        "csrf": session.csrf_token(container.settings.admin_token, current.value),
    }
    return _render(request, "confirm.html", context)


@router.post("/redrive")
async def redrive(request: Request) -> Response:
    """Redrive for real and show what was published."""
    checked = await _checked_post(request)
    if checked is None:
        return _to_login()
    container, current, form = checked
    report = (await _redrive(container, form, dry_run=False)).to_json()
    # The rows as they are now, after the redrive: not the states the redrive started from.
    ids = [item["send_record_id"] for item in report["items"] if item["send_record_id"]]
    async with container.engine.connect() as conn:
        now = await activity.send_states(conn, ids)
    for item in report["items"]:
        item["send_state_now"] = now.get(item["send_record_id"])
    context = {
        "report": report,
        "csrf": session.csrf_token(container.settings.admin_token, current.value),
    }
    return _render(request, "result.html", context, 200 if not report.get("error") else 502)


@router.post("/discard")
async def discard_dead_letter(request: Request) -> Response:
    """Discard one quarantined dead letter and show what happened."""
    checked = await _checked_post(request)
    if checked is None:
        return _to_login()
    container, current, form = checked
    ident = dead_letters.parse_row_id(form.get("id", ""))
    if ident is None:
        raise NotFound("nothing to discard: unknown dead letter")
    async with container.engine.begin() as conn:
        [item] = await discard.discard_dead_letters(conn, [ident], now=container.clock())
    context = {
        "item": item,
        "csrf": session.csrf_token(container.settings.admin_token, current.value),
    }
    return _render(request, "discarded.html", context, 200 if item.discarded else 409)
