"""Rendering at send time: templates per kind and channel, unsubscribe links, clear failures."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import jinja2
import pytest

from app.adapters.rendering import Renderer
from app.domain.errors import NotFound, PermanentProviderError
from app.domain.messages import CustomerView, ReminderView
from app.domain.unsubscribe import UnsubscribeLinks

LINKS = UnsubscribeLinks("https://relay.example/", b"secret-for-tests")
CUSTOMER = CustomerView("cust_1", "ada@example.com", None, "Europe/Paris", frozenset(), None)


def reminder(kind: str = "weekly_digest", **data: object) -> ReminderView:
    """A reminder of ``kind`` with ``data``."""
    due = datetime(2026, 8, 10, 7, 0, tzinfo=UTC)
    return ReminderView("r1", "cust_1", kind, "enqueued", due, None, ("email",), data, 1)


def test_weekly_digest_renders_subject_text_html_and_unsubscribe_headers():
    """The default digest has all three parts; links become RFC 8058 headers and text."""
    message = Renderer(unsubscribe_links=LINKS).render(
        reminder(week="2026-W33", items=["<b>a</b>"]), CUSTOMER, "email"
    )
    url = LINKS.url_for("cust_1", "email")
    assert message.subject == "Your weekly digest for 2026-W33"
    assert "- <b>a</b>" in message.text and url in message.text
    assert message.html is not None and "&lt;b&gt;a&lt;/b&gt;" in message.html  # autoescaped
    assert "09:00 CEST" in message.text  # the customer's time zone
    assert message.headers == {
        "List-Unsubscribe": f"<{url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    }


def test_without_links_there_are_no_unsubscribe_headers():
    """Links are optional (no secret configured): no headers, templates still render."""
    message = Renderer().render(reminder(), CUSTOMER, "email")
    assert message.headers == {}
    assert "unsubscribe" not in message.text.lower()


def test_missing_template_is_a_permanent_template_missing_error():
    """An unknown kind is a permanent failure naming the template."""
    with pytest.raises(PermanentProviderError) as caught:
        Renderer().render(reminder("no_such_kind"), CUSTOMER, "email")
    assert caught.value.detail_class == "template_missing"
    assert "no_such_kind/email_subject.txt" in str(caught.value)


def test_undefined_variable_is_a_permanent_template_error(tmp_path: Path):
    """A template using a name the context lacks fails clearly, never half-renders."""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "email_subject.txt").write_text("Hi {{ nobody.name }}")
    (tmp_path / "broken" / "email.txt").write_text("body")
    with pytest.raises(PermanentProviderError) as caught:
        Renderer(tmp_path).render(reminder("broken"), CUSTOMER, "email")
    assert caught.value.detail_class == "template_error"


def test_extra_directory_overrides_the_built_in_templates(tmp_path: Path):
    """REMINDERS_TEMPLATES_DIR is searched before the package's templates."""
    (tmp_path / "weekly_digest").mkdir()
    (tmp_path / "weekly_digest" / "email_subject.txt").write_text("Custom {{ customer.id }}")
    message = Renderer(tmp_path).render(reminder(), CUSTOMER, "email")
    assert message.subject == "Custom cust_1"


def test_webhook_body_is_structured_json():
    """Webhooks carry the reminder as data, no template needed."""
    message = Renderer(unsubscribe_links=LINKS).render(reminder(week="W1"), CUSTOMER, "webhook")
    assert message.body is not None
    assert message.body["type"] == "reminder.weekly_digest"
    assert message.body["data"] == {"week": "W1"}
    assert message.headers == {}


def test_unsubscribe_tokens_round_trip_and_refuse_forgeries():
    """A token names its customer and channel; another secret's token is not ours."""
    token = LINKS.token_for("cust:1@x", "email")
    assert LINKS.read(token) == ("cust:1@x", "email")
    other = UnsubscribeLinks("https://relay.example", b"another-secret")
    with pytest.raises(NotFound):
        other.read(token)
    payload, mac = token.split(".")
    with pytest.raises(NotFound):
        LINKS.read(f"{payload}x.{mac}")


def test_a_kind_without_an_html_part_is_looked_up_on_disk_once(tmp_path, monkeypatch):
    """Jinja caches the templates it found, not a missing one: the renderer remembers that a
    kind has no HTML part instead of searching the folders again at every send."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "email_subject.txt").write_text("Hello")
    (tmp_path / "plain" / "email.txt").write_text("Text only")
    lookups: list[str] = []
    real = jinja2.FileSystemLoader.get_source

    def counted(loader, environment, name):
        lookups.append(name)
        return real(loader, environment, name)

    monkeypatch.setattr(jinja2.FileSystemLoader, "get_source", counted)
    renderer = Renderer(tmp_path)
    for _ in range(3):
        message = renderer.render(reminder("plain"), CUSTOMER, "email")
        assert message.html is None and message.text == "Text only"
    assert lookups.count("plain/email.html") == 1


def test_jinja_built_in_globals_still_render_with_flattened_globals(tmp_path: Path):
    """Each template's globals are one dict taken when it loads (a render iterated Jinja's
    ChainMap twice), holding the same built-ins: range, namespace, cycler, dict."""
    (tmp_path / "loops").mkdir()
    (tmp_path / "loops" / "email_subject.txt").write_text(
        "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}"
        "{% endfor %}Sum {{ ns.n }}"
    )
    (tmp_path / "loops" / "email.txt").write_text(
        "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ dict(k=1)['k'] }}"
    )
    renderer = Renderer(tmp_path)
    message = renderer.render(reminder("loops"), CUSTOMER, "email")
    assert (message.subject, message.text) == ("Sum 3", "ab1")
    template = renderer._text.get_template("loops/email.txt")
    assert type(template.globals) is dict
