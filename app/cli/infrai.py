"""``reminders setup-infrai``: Infrai's setup (``reminders setup --queue infrai``) under the
name its operators know, with ``--pull`` for a pull-worker deployment (no push
subscriptions). The steps are the kind's own (``app/adapters/queues/infrai/tools.py``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from app.adapters.queues.infrai import KIND
from app.adapters.queues.kind import ToolOptions
from app.cli.common import load_settings
from app.cli.setup import run_setup


def setup_infrai_command(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the calls; make none.")] = False,
    pull: Annotated[
        bool, typer.Option("--pull", help="Pull deployment: no push subscriptions.")
    ] = False,
) -> None:
    """Create the queues, DLQs, push subscriptions and sweep cron on Infrai (idempotent)."""
    run_setup(KIND, load_settings(), ToolOptions(dry_run=dry_run, pull=pull))
