"""Render reminders at send time with Jinja2 (HTML autoescaped, undefined names are errors).

Templates live in ``app/templates/<kind>/``: ``email_subject.txt``, ``email.txt`` and
optionally ``email.html``. ``REMINDERS_TEMPLATES_DIR`` adds a directory searched first.
Webhooks carry a JSON body built from the reminder, so they need no template.
Emails get the customer's one-click unsubscribe URL as ``List-Unsubscribe`` headers (RFC 8058)
and as ``unsubscribe_url`` in the template context (None when links are not configured).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jinja2
from jinja2 import nodes

from app.domain.errors import PermanentProviderError
from app.domain.messages import CustomerView, ReminderView, RenderedMessage
from app.domain.unsubscribe import UnsubscribeLinks

_PACKAGE_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
_EMAIL_PARTS = ("email_subject.txt", "email.txt", "email.html")
_DICT_METHODS = frozenset({"get", "items", "keys", "values"})


@dataclass(frozen=True, slots=True)
class DataField:
    """A key of ``data`` a kind's templates read; required when read without a default."""

    name: str
    required: bool


class _Environment(jinja2.Environment):
    """Jinja's environment with each template's globals kept as one plain dict.

    Jinja layers a template's globals over the environment's in a ``ChainMap`` and iterates
    it twice per render (to build the context and to list the global names): that was half
    of a render's CPU and 8% of a new delivery's (bench/push.py, py-spy). The renderer's
    environments get no globals after they are built, so a snapshot taken when a template
    loads reads the same names, in the same order of precedence.
    """

    def make_globals(self, d: Any = None) -> Any:
        """The environment's globals overlaid by the template's, as one dict."""
        return {**self.globals, **(d or {})}


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
        self._text = _Environment(autoescape=False, **common)
        self._html = _Environment(autoescape=True, **common)
        # Each kind's HTML part, or None: Jinja caches templates it found, not a missing
        # one, which it would look for on disk again at every render (a stat per folder
        # and an exception: ~3% of serve's CPU in a profile of the end-to-end bench).
        self._html_parts: dict[str, jinja2.Template | None] = {}

    def knows_kind(self, kind: str) -> bool:
        """True when the kind has at least the email subject and text templates."""
        try:
            self._text.get_template(f"{kind}/email_subject.txt")
            self._text.get_template(f"{kind}/email.txt")
        except jinja2.TemplateNotFound:
            return False
        return True

    def kinds(self) -> list[str]:
        """Every kind with email templates, in the extra directory or built in, sorted."""
        named = {name.split("/")[0] for name in self._text.list_templates() if "/" in name}
        return sorted(kind for kind in named if self.knows_kind(kind))

    def has_html(self, kind: str) -> bool:
        """True when the kind has an HTML email part."""
        try:
            self._html.get_template(f"{kind}/email.html")
        except jinja2.TemplateNotFound:
            return False
        return True

    def data_fields(self, kind: str) -> list[DataField]:
        """The ``data`` keys a kind's email templates read, by name (from their syntax tree:
        ``data["x"]`` and ``data.x`` are required, ``data.get("x")`` is not)."""
        found: dict[str, bool] = {}
        for part in _EMAIL_PARTS:
            try:
                source, _, _ = self._text.loader.get_source(self._text, f"{kind}/{part}")  # type: ignore[union-attr]
            except jinja2.TemplateNotFound:
                continue
            for name, required in _data_reads(self._text.parse(source)):
                found[name] = found.get(name, True) and required
        return [DataField(name, required) for name, required in sorted(found.items())]

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
        if kind not in self._html_parts:
            try:
                self._html_parts[kind] = self._html.get_template(f"{kind}/email.html")
            except jinja2.TemplateNotFound:
                self._html_parts[kind] = None
        template = self._html_parts[kind]
        return None if template is None else template.render(context)


def _data_reads(tree: nodes.Template) -> list[tuple[str, bool]]:
    # (key, required) for each read of ``data`` with a constant key.
    reads: list[tuple[str, bool]] = []
    for node in tree.find_all((nodes.Getitem, nodes.Getattr, nodes.Call)):
        if isinstance(node, nodes.Call):
            callee = node.node
            if (
                _is_data(callee)
                and isinstance(callee, nodes.Getattr)
                and callee.attr == "get"
                and node.args
                and isinstance(node.args[0], nodes.Const)
            ):
                reads.append((str(node.args[0].value), False))
        elif isinstance(node, nodes.Getitem) and _is_data(node):
            if isinstance(node.arg, nodes.Const):
                reads.append((str(node.arg.value), True))
        elif isinstance(node, nodes.Getattr) and _is_data(node) and node.attr not in _DICT_METHODS:
            reads.append((node.attr, True))
    return reads


def _is_data(node: nodes.Node) -> bool:
    inner = getattr(node, "node", None)
    return isinstance(inner, nodes.Name) and inner.name == "data"


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
