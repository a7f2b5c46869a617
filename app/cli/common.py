"""What every ``reminders`` sub-command shares: the settings and the container's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from rich.console import Console

from app.container import Container, open_container
from app.settings import Settings

_console = Console(stderr=True)
T = TypeVar("T")


def load_settings() -> Settings:
    """Settings from the environment, or exit 2 naming what is misconfigured."""
    try:
        return Settings()
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        _console.print(f"[red]configuration error:[/red] {error}")
        raise typer.Exit(2) from None


def run_in_container(settings: Settings, work: Callable[[Container], Awaitable[T]]) -> T:
    """Run one command's work with the service's objects, all closed once when it ends."""

    async def main() -> T:
        async with open_container(settings) as container:
            return await work(container)

    return asyncio.run(main())
