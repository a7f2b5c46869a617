"""Every setting the service reads is documented: in the README's table or on the docs page
its README row points to. A setting added without a line of documentation fails here."""

from __future__ import annotations

import re
from pathlib import Path

from app.settings import SETTING_VARIABLES

ROOT = Path(__file__).resolve().parents[2]
# `REMINDERS_SMTP_HOST` / `_PORT`, or `REMINDERS_X_A` (1), `_B` (2): the later names share
# the first one's head.
_SHORTHAND = re.compile(r"`(REMINDERS_[A-Z0-9_]+)`((?:\s*(?:\([^)]*\))?\s*[/,]\s*`_[A-Z0-9_]+`)+)")
_TAIL = re.compile(r"`(_[A-Z0-9_]+)`")


def documented_text() -> str:
    """README and every docs page, with each `A_B` / `_C` shorthand also spelled out."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    spelled = []
    for first, tails in _SHORTHAND.findall(text):
        parts = first.split("_")
        for tail in _TAIL.findall(tails):
            spelled += ["_".join(parts[:cut]) + tail for cut in range(2, len(parts))]
    return text + "\n" + "\n".join(spelled)


def test_every_setting_is_documented():
    """Each REMINDERS_* variable (and the emulator hosts) appears in the README or docs/."""
    text = documented_text()
    missing = sorted(name for name in SETTING_VARIABLES if name not in text)
    assert missing == []


def test_the_check_reads_nested_groups():
    """The embedded queue's group is read too, so the check above can fail for it."""
    names = SETTING_VARIABLES
    assert "REMINDERS_EMBEDDED_CONCURRENCY" in names and "REMINDERS_API_TOKEN" in names
    assert "REMINDERS_QSTASH_RETRIES" in names and "REMINDERS_SNS_REGION" in names
