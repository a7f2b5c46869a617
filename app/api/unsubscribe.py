"""``/unsubscribe/{token}``: the one-click unsubscribe target of our emails (RFC 8058).

``POST`` (what mail clients send for ``List-Unsubscribe-Post: List-Unsubscribe=One-Click``,
and what the confirmation form submits) records the opt-out. ``GET`` only shows a
confirmation page: link scanners and previews fetch URLs, and must not unsubscribe anyone.
The token is the credential; an invalid one is a 404.
"""

from __future__ import annotations

from html import escape

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from app.domain.errors import NotFound
from app.domain.unsubscribe import UnsubscribeLinks
from app.services import unsubscribe as service

from .deps import ConnectionDep, ContainerDep

router = APIRouter(tags=["unsubscribe"])

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><meta name="robots" content="noindex">
<title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>"""


def _links(container: ContainerDep) -> UnsubscribeLinks:
    links = container.renderer.unsubscribe_links
    if links is None:
        raise NotFound("unsubscribe links are not configured")
    return links


@router.get("/unsubscribe/{token}", response_class=HTMLResponse)
async def confirm_unsubscribe(token: str, container: ContainerDep) -> HTMLResponse:
    """A page asking to confirm; nothing changes until the form is posted."""
    _, channel = service.check_link(_links(container), token)
    form = (
        f'<p>Stop receiving {escape(channel)} reminders?</p><form method="post">'
        '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
        '<button type="submit">Unsubscribe</button></form>'
    )
    return HTMLResponse(_PAGE.format(title="Unsubscribe", body=form))


@router.post("/unsubscribe/{token}", response_class=HTMLResponse)
async def unsubscribe(token: str, conn: ConnectionDep, container: ContainerDep) -> HTMLResponse:
    """One-click unsubscribe: the customer is opted out of the link's channel."""
    _, channel = await service.unsubscribe(conn, _links(container), token, now=container.clock())
    body = f"<p>You will not receive {escape(channel)} reminders any more.</p>"
    return HTMLResponse(_PAGE.format(title="Unsubscribed", body=body))
