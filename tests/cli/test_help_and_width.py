"""The CLI a person reads: ``--help`` in a sensible order, plain text, within 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import COMMANDS, ORDER, cli, load_command
from app.cli.tables import Column, fitted_table

REMINDERS = str(Path(sys.executable).parent / "reminders")


def _every_command_path() -> list[list[str]]:
    paths = []
    for name in ORDER:
        paths.append([name])
        paths += [[name, sub] for sub in getattr(load_command(name), "commands", {})]
    return paths


@pytest.mark.parametrize("name", ORDER)
def test_the_listed_summary_is_the_commands_own(name):
    """`reminders --help` lists each command with its help's first paragraph, unimported."""
    command = load_command(name)
    assert (command.help or "").split("\n\n")[0].replace("\n", " ") == COMMANDS[name].summary


def test_help_imports_no_command_module():
    """`reminders --help` stays fast: no command module, FastAPI or SQLAlchemy is imported."""
    script = (
        "import sys\n"
        "from app.cli import main\n"
        "sys.argv = ['reminders', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('fastapi', 'sqlalchemy', 'pydantic_settings', 'app.container')\n"
        "print('LOADED', [name for name in heavy if name in sys.modules])\n"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "LOADED []" in shown.stdout


def test_top_level_help_lists_commands_in_newcomer_order_within_80_columns():
    """`reminders --help` (the installed command) lists the commands as a newcomer meets
    them — try, run, operate, then the managed queue — without RST markup or wide lines."""
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    shown = subprocess.run(
        [REMINDERS, "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    listed = [
        line.strip("│ ").split()[0]
        for line in shown.stdout.split("Commands", 1)[1].splitlines()
        if line.startswith("│ ") and not line.startswith("│  ")
    ]
    assert listed == list(ORDER)
    assert ORDER[:3] == ("demo", "serve", "migrate")  # try it, run it, set it up
    assert ORDER[-3:] == ("setup-infrai", "check", "worker")  # the managed queue last
    assert "``" not in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


@pytest.mark.parametrize("path", _every_command_path(), ids=" ".join)
def test_every_command_help_is_plain_text_within_80_columns(path):
    """Each command's help has no RST markup (``code``, :role:) and fits 80 columns."""
    result = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "``" not in result.output and ":class:" not in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_a_table_drops_its_least_useful_columns_before_cutting_a_value():
    """Too wide: columns go by priority; what stays is whole (wrapped, never '…')."""
    columns = [
        Column("id"),
        Column("reminder", min_width=12),
        Column("queue", min_width=10, priority=2),
        Column("reason", min_width=18, priority=1),
    ]
    rows = [["17", "digest-cust_1842:2026-08-17T09:00", "reminders-email", "attempts_exhausted"]]
    wide = fitted_table("t", columns, rows, width=200)
    assert [c.header for c in wide.columns] == ["id", "reminder", "queue", "reason"]
    narrow = fitted_table("t", columns, rows, width=60)
    assert [c.header for c in narrow.columns] == ["id", "reminder", "reason"]
    tight = fitted_table("t", columns, rows, width=30)
    assert [c.header for c in tight.columns] == ["id", "reminder"]
    from rich.console import Console

    console = Console(width=30, record=True)
    console.print(tight)
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 30
    assert "".join(text.split()).count("digest-cust_1842:2026-08-17T09:00") == 1


def test_a_dead_letter_with_a_large_id_keeps_its_reminder_whole_at_80_columns():
    """Ids are 64-bit: a seven-digit dead-letter id and a 33-character reminder id still fit
    80 columns on one line each (the age goes before the reminder is wrapped)."""
    from rich.console import Console

    from app.cli.dead_letters_tables import dead_letter_table

    reminder_id = "digest-cust_1842:2026-08-17T09:00"
    item = {
        "id": 1234567,
        "reminder_id": reminder_id,
        "channel": "email",
        "error_class": "smtp_4xx",
        "attempts": 3,
        "age_seconds": 9_700_000,
        "reason": "attempts_exhausted",
        "send_state": "dead",
        "queue": "reminders",
        "redriven_at": None,
    }
    console = Console(width=80, record=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("app.cli.dead_letters_tables.console", console)
        console.print(dead_letter_table([item]))
    text = console.export_text()
    assert reminder_id in text and "1234567" in text and "smtp_4xx" in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
