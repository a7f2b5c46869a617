"""``/admin/suppressions``: the suppression list on the operator's page (list, add, lift),
with the 24 h bounce and complaint rates. Same session and CSRF rules as ``admin``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.domain.errors import Conflict, InvalidInput, NotFound
from app.domain.suppression import SuppressionReason
from app.services import suppressions
from app.services.deliverability import deliverability_figures

from ..deps import get_container
from . import session
from .admin import _checked_post, _render, _session, _to_login

router = APIRouter(prefix="/admin/suppressions", include_in_schema=False)
PAGE = 50


@router.get("")
async def suppressions_page(
    request: Request,
    email: Annotated[str | None, Query(max_length=320)] = None,
    reason: SuppressionReason | None = None,
    cursor: Annotated[str | None, Query(max_length=600)] = None,
) -> Response:
    """Suppressed addresses (filter by address or reason), the rates, add and lift forms."""
    container = get_container(request)
    current = await _session(request, container)
    if current is None:
        return _to_login()
    filters = suppressions.SuppressionFilters(email=email or None, reason=reason)
    async with container.engine.connect() as conn:
        figures = await deliverability_figures(conn, now=container.clock())
        try:
            page = await suppressions.list_suppressions(conn, filters, cursor=cursor, limit=PAGE)
            problem = None
        except InvalidInput as error:
            page, problem = suppressions.Page([], None), str(error)
    context: dict[str, Any] = {
        "figures": figures,
        "page": page,
        "email": email or "",
        "reason": reason.value if reason else "",
        "reasons": [r.value for r in SuppressionReason],
        "problem": problem,
        "csrf": session.csrf_token(container.settings.admin_token, current.value),
    }
    return _render(request, "suppressions.html", context)


@router.post("/add")
async def add_suppression(request: Request) -> Response:
    """Suppress one address by hand."""
    return await _change(request, "add")


@router.post("/lift")
async def lift_suppression(request: Request) -> Response:
    """Lift one suppression (a complaint only with the force box ticked)."""
    return await _change(request, "lift")


async def _change(request: Request, action: str) -> Response:
    checked = await _checked_post(request)
    if checked is None:
        return _to_login()
    container, _, form = checked
    email = form.get("email", "")
    try:
        async with container.engine.begin() as conn:
            if action == "add":
                await suppressions.suppress_by_hand(
                    conn, email, source="admin", detail=form.get("detail") or None,
                    now=container.clock(),
                )  # fmt: skip
                message, status = f"{email} is suppressed.", 200
            else:
                force = form.get("force") == "on"
                row = await suppressions.lift_suppression(conn, email, force=force)
                message, status = f"Lifted {row['email']} ({row['reason']}).", 200
    except (InvalidInput, NotFound, Conflict) as error:
        message, status = str(error), 409 if isinstance(error, Conflict) else 422
    context = {"message": message, "ok": status == 200}
    return _render(request, "suppression_result.html", context, status)
