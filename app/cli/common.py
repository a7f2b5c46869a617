"""What every ``reminders`` sub-command shares: the settings, the container's lifetime and
the startup line.

A command's stdout is its answer (JSON, tables); its log lines, the startup line first, go
to stderr. ``serve`` alone logs on stdout (its log lines are its output).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import typer
from pydantic_settings import BaseSettings
from rich.console import Console

from app.container import Container, open_container
from app.domain.errors import ConfigError
from app.observability.logs import configure_logging
from app.observability.startup import announce
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


def log_to_stderr(level: str = "INFO", log_format: str = "auto") -> None:
    """A command's log lines on stderr, keeping stdout for its answer."""
    configure_logging(level, log_format=log_format, stderr=True)


def command_name() -> str:
    """``reminders sweep``, ``reminders dead-letters``…: the command this process runs (its
    name only: arguments may carry a URL with a password)."""
    words = [word for word in sys.argv[1:2] if not word.startswith("-")]
    return " ".join(["reminders", *words])


@asynccontextmanager
async def checked_container(settings: Settings) -> AsyncIterator[Container]:
    """``open_container``; a configuration the container refuses (a malformed secret, a
    missing extra) is one line and exit 1, not a traceback."""
    try:
        async with open_container(settings) as container:
            yield container
    except ConfigError as error:
        fail(f"configuration error: {error}")


@asynccontextmanager
async def command_container(settings: Settings) -> AsyncIterator[Container]:
    """The service's objects for one command, after its startup line."""
    log_to_stderr(settings.log_level, settings.log_format)
    async with checked_container(settings) as container:
        await announce(command_name(), settings, container.readiness_engine)
        yield container


def run_in_container(settings: Settings, work: Callable[[Container], Awaitable[T]]) -> T:
    """Run one command's work with the service's objects, all closed once when it ends."""

    async def main() -> T:
        async with command_container(settings) as container:
            return await work(container)

    return asyncio.run(main())
