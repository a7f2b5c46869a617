"""Render reminders at send time with Jinja2 (HTML autoescaped, undefined names are errors).

Templates live in ``app/templates/<kind>/``: ``email_subject.txt``, ``email.txt`` and
optionally ``email.html``. ``REMINDERS_TEMPLATES_DIR`` adds a directory searched first.
Webhooks carry a JSON body built from the reminder, so they need no template.
Emails get the customer's one-click unsubscribe URL as ``List-Unsubscribe`` headers (RFC 8058)
and as ``unsubscribe_url`` in the template context (None when links are not configured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2

from app.domain.errors import PermanentProviderError
from app.domain.messages import CustomerView, ReminderView, RenderedMessage
from app.domain.unsubscribe import UnsubscribeLinks

_PACKAGE_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


class Renderer:
    """Turns a reminder and its customer into a RenderedMessage for one channel."""

    def __init__(
        self, extra_dir: Path | None = None, *, unsubscribe_links: UnsubscribeLinks | None = None
    ) -> None:
        self.unsubscribe_links = unsubscribe_links
        search = [str(extra_dir)] if extra_dir else []
        loader = jinja2.FileSystemLoader([*search, str(_PACKAGE_TEMPLATES)])
        # auto_reload off: templates are read once per process, not stat()ed on every render
        # (~5% of a delivery's CPU, bench/push.py); a template change needs a restart.
        common: dict[str, Any] = {
            "loader": loader,
            "undefined": jinja2.StrictUndefined,
            "auto_reload": False,
        }
        self._text = jinja2.Environment(autoescape=False, **common)
        self._html = jinja2.Environment(autoescape=True, **common)

    def knows_kind(self, kind: str) -> bool:
        """True when the kind has at least the email subject and text templates."""
        try:
            self._text.get_template(f"{kind}/email_subject.txt")
            self._text.get_template(f"{kind}/email.txt")
        except jinja2.TemplateNotFound:
            return False
        return True

    def render(
        self, reminder: ReminderView, customer: CustomerView, channel: str
    ) -> RenderedMessage:
        """The message for one channel; template problems are permanent errors."""
        if channel == "webhook":
            return RenderedMessage(
                channel, customer.webhook_url or "", body=_webhook_body(reminder, customer)
            )
        unsubscribe_url = (
            self.unsubscribe_links.url_for(customer.id, channel) if self.unsubscribe_links else None
        )
        context = {**_context(reminder, customer), "unsubscribe_url": unsubscribe_url}
        try:
            subject = self._text.get_template(f"{reminder.kind}/email_subject.txt").render(context)
            text = self._text.get_template(f"{reminder.kind}/email.txt").render(context)
            html = self._render_optional_html(reminder.kind, context)
        except jinja2.TemplateNotFound as error:
            raise PermanentProviderError(
                f"no template {error.name!r} for kind {reminder.kind!r}",
                detail_class="template_missing",
            ) from error
        except Exception as error:  # any render failure is terminal, never a retry loop
            raise PermanentProviderError(
                f"template for {reminder.kind!r} failed: {type(error).__name__}: {error}",
                detail_class="template_error",
            ) from error
        return RenderedMessage(
            channel,
            customer.email or "",
            subject=" ".join(subject.split()),
            text=text,
            html=html,
            headers=_unsubscribe_headers(unsubscribe_url),
        )

    def _render_optional_html(self, kind: str, context: dict[str, Any]) -> str | None:
        try:
            template = self._html.get_template(f"{kind}/email.html")
        except jinja2.TemplateNotFound:
            return None
        return template.render(context)


def _unsubscribe_headers(url: str | None) -> dict[str, str]:
    if url is None:
        return {}
    return {"List-Unsubscribe": f"<{url}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}


def _context(reminder: ReminderView, customer: CustomerView) -> dict[str, Any]:
    try:
        zone = ZoneInfo(customer.time_zone)
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    return {
        "reminder": reminder,
        "customer": customer,
        "data": reminder.data,
        "due_at_local": reminder.due_at.astimezone(zone),
    }


def _webhook_body(reminder: ReminderView, customer: CustomerView) -> dict[str, Any]:
    return {
        "type": f"reminder.{reminder.kind}",
        "reminder_id": reminder.id,
        "customer_id": customer.id,
        "due_at": reminder.due_at.isoformat(),
        "schedule_version": reminder.schedule_version,
        "data": dict(reminder.data),
    }
