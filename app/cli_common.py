"""What every ``reminders`` sub-command shares."""

from __future__ import annotations

import typer
from rich.console import Console

from app.settings import Settings

_console = Console(stderr=True)


def load_settings() -> Settings:
    """Settings from the environment, or exit 2 naming what is misconfigured."""
    try:
        return Settings()
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        _console.print(f"[red]configuration error:[/red] {error}")
        raise typer.Exit(2) from None
