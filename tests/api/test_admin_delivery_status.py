"""The admin page shows each send's delivery status, as provider events reported it."""

from __future__ import annotations

import html
import re

import orjson
from pydantic import SecretStr

from app.adapters.email_events.postmark import PostmarkEvents
from tests.api.test_admin_page import _login
from tests.api.test_email_events import sent_email
from tests.support import email_events as ev
from tests.support.flow import get_reminder

_ROW = re.compile(r'<tr data-send="(\d+)">(.*?)</tr>', re.S)
_DELIVERY = re.compile(r'<td class="delivery" title="([^"]*)">([^<]*)</td>')


def delivery_cells(page: str, send_id: int) -> list[tuple[str, str]]:
    """(title, text) of the delivery cell in every row of ``send_id`` on the page."""
    cells = []
    for found_id, row in _ROW.findall(page):
        if int(found_id) == send_id:
            [(title, text)] = _DELIVERY.findall(row)
            cells.append((html.unescape(title), text.strip()))
    return cells


async def test_the_sends_tables_show_the_delivery_status_and_its_reason(
    client, container, publisher, clock, provider
):
    """Before any event the delivery cell is empty; after Postmark's hard bounce both the
    reminder lookup and the recent sends show ``bounced``, the provider's reason as title."""
    container.event_sources = {
        "postmark": PostmarkEvents(ev.POSTMARK_USER, SecretStr(ev.POSTMARK_PASSWORD))
    }
    email = await sent_email(client, publisher, clock, provider, "r:adm", "pm-admin-1")
    [record] = (await get_reminder(client, "r:adm"))["send_records"]
    headers = await _login(client)
    page = (await client.get("/admin", params={"reminder": "r:adm"}, headers=headers)).text
    assert delivery_cells(page, record["id"]) == [("", ""), ("", "")]  # lookup, recent sends

    bounce = ev.postmark_bounce("pm-admin-1", email, record_id=9001)
    answer = await client.post(
        "/events/email/postmark", content=orjson.dumps(bounce), headers=ev.postmark_headers()
    )
    assert answer.json()["matched"] == 1
    page = (await client.get("/admin", params={"reminder": "r:adm"}, headers=headers)).text
    cells = delivery_cells(page, record["id"])
    assert len(cells) == 2 and all(text == "bounced" for _, text in cells)
    assert all(title.startswith("HardBounce: The server was unable") for title, _ in cells)
