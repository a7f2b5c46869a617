"""What every ``reminders`` sub-command shares: the settings and the container's lifetime."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from pydantic_settings import BaseSettings
from rich.console import Console

from app.container import Container, open_container
from app.settings import (
    ConfigurationProblems,
    DatabaseSettings,
    Settings,
    explain,
    read_settings,
)

_console = Console(stderr=True, highlight=False, soft_wrap=True)
T = TypeVar("T")
S = TypeVar("S", bound=BaseSettings)


def load_settings() -> Settings:
    """Settings from the environment, or exit 1 naming everything that is misconfigured."""
    return _read(Settings)


def load_database_settings() -> DatabaseSettings:
    """Only the database settings: for ``migrate``, which needs no secret."""
    return _read(DatabaseSettings)


def _read(cls: type[S]) -> S:
    try:
        return read_settings(cls)
    except ConfigurationProblems as problems:
        fail(*explain(problems))
        raise  # unreachable: fail() exits


def fail(*lines: str) -> None:
    """Refuse: print the lines on stderr (plain, one per line) and exit 1."""
    for line in lines:
        _console.print(f"reminders: {line}", markup=False)
    raise typer.Exit(1)


def run_in_container(settings: Settings, work: Callable[[Container], Awaitable[T]]) -> T:
    """Run one command's work with the service's objects, all closed once when it ends."""

    async def main() -> T:
        async with open_container(settings) as container:
            return await work(container)

    return asyncio.run(main())
