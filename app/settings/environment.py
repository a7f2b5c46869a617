"""``REMINDERS_*`` variables that no setting reads: a typo, refused at startup.

pydantic-settings ignores variables it does not know, so ``REMINDERS_DATABSE_URL`` (misspelt)
used to start the service on its default database without a word. Every ``REMINDERS_*``
name in the environment must be a setting (``SETTING_VARIABLES``, derived from the model) or
one of the names below, which the project's own scripts read; each other one is one line
naming the nearest setting.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

PREFIX = "REMINDERS_"

# The one allow-list: REMINDERS_* names that are no setting of the service but are read by
# the project's own tooling, so they may be in the environment of any process.
NOT_SETTINGS = frozenset(
    {
        "REMINDERS_MIGRATE_ON_START",  # the container's entrypoint (docker/entrypoint.sh)
        "REMINDERS_CI",  # .ci/run: missing test services fail instead of skipping
    }
)
NOT_SETTINGS_PREFIXES = (
    "REMINDERS_TEST_",  # the test suite (REMINDERS_TEST_DB, REMINDERS_TEST_PG_ADMIN_URL, …)
    "REMINDERS_BENCH_",  # bench/ (REMINDERS_BENCH_PG_ADMIN_URL)
    "REMINDERS_SIMULATION_",  # tests/simulation (REMINDERS_SIMULATION_SEEDS, _STEPS)
    "REMINDERS_TASKS_EMULATOR_",  # tests/support/google_emulators.py
)


def unknown_variables(environ: Mapping[str, str], known: Iterable[str]) -> list[str]:
    """One problem per ``REMINDERS_*`` variable no setting reads, with the nearest setting.

    Names compare case-insensitively, as pydantic-settings reads them; the nearest name is
    chosen by what follows the prefix (every name shares ``REMINDERS_``).
    """
    by_tail = {name.upper().removeprefix(PREFIX): name for name in known}
    problems = []
    for name in sorted(environ):
        tail = name.upper().removeprefix(PREFIX)
        if not name.upper().startswith(PREFIX) or tail in by_tail or _allowed(name.upper()):
            continue
        close = difflib.get_close_matches(tail, list(by_tail), n=1)
        hint = (
            f"did you mean {by_tail[close[0]]}?"
            if close
            else "remove it (the README's configuration table lists every setting)"
        )
        problems.append(f"{name} is not a setting: {hint}")
    return problems


def _allowed(name: str) -> bool:
    return name in NOT_SETTINGS or name.startswith(NOT_SETTINGS_PREFIXES)
