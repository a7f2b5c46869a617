"""``QueueKind``: everything the service knows about one ``REMINDERS_QUEUE`` value.

Each package ``app/adapters/queues/<kind>/`` exports one ``KIND`` built from this class,
and ``kinds.QUEUE_KINDS`` lists them. The registry (publishers, push formats, pull
consumers), ``reminders setup`` and ``reminders check``, the settings' accepted queue
values and the extra each kind needs are all read from those values.

This module, every kind's ``__init__`` and its ``settings`` module stay light and import
nothing of ``app.settings`` (the settings package imports them to build the ``Settings``
model): the builders are ``Lazy`` references, imported on first use, which
also keeps a kind's client libraries (an optional extra) out of the default install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Literal

from pydantic_settings import BaseSettings


@dataclass(frozen=True, slots=True)
class Lazy:
    """A function named by module and attribute, imported when first called."""

    module: str
    function: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Import the module, then call the function."""
        return getattr(import_module(self.module), self.function)(*args, **kwargs)


Builder = Callable[..., Any]
CheckStatus = Literal["pass", "warn", "fail"]
CHECK_TITLE = "check"


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """The options of ``reminders setup`` and ``reminders check`` beyond the kind: each
    kind's ``setup`` and ``check`` read those that apply to it (the defaults otherwise)."""

    dry_run: bool = False  # setup: say the calls, make none
    pull: bool = False  # a pull-worker deployment: no push subscriptions
    discovery_file: Path | None = None  # check: a recorded discovery document, not fetched
    skip_queues: bool = False  # check: do not verify the queues themselves (no API key)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One line of the pass/fail table of ``reminders check``."""

    check: str
    status: CheckStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    """What a kind's ``setup`` or ``check`` did or found: one table of the command's output.

    The CLI colours the cells of the ``result`` column by their word (created, exists, PASS,
    FAIL…) and exits 1 when ``failed``.
    """

    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    failed: bool = False


class SetupRefused(Exception):
    """The configuration cannot be set up as it is; nothing was called (exit 2)."""


def setup_report(kind: str, actions: Iterable[Any]) -> Report:
    """The usual setup table: one row per resource (its ``kind``, ``name`` and ``status``)."""
    rows = [(action.kind, action.name, action.status) for action in actions]
    return Report(f"setup --queue {kind}", ("resource", "name", "result"), rows)


def check_report(results: Iterable[CheckResult], title: str = CHECK_TITLE) -> Report:
    """The check table: one row per result; failed when any result failed."""
    results = list(results)
    rows = [(r.check, r.status.upper(), r.detail) for r in results]
    failed = any(r.status == "fail" for r in results)
    return Report(title, ("check", "result", "detail"), rows, failed)


@dataclass(frozen=True, slots=True)
class QueueKind:
    """One queue kind: its name, settings, builders and tools.

    ``publisher(parts)`` builds the publisher. A push kind has ``push_format(parts)``
    (built once per kind, shared by its queues so caches of fetched keys stay warm) or
    ``push_format_for(parts, queue)`` (one per queue: QStash's signature names the
    queue's URL); a pull kind has ``consumer(settings, http)`` for ``reminders worker``.
    ``setup(settings, http, options)`` and ``check(settings, http, options)`` are coroutines
    returning the ``Report`` that ``reminders setup`` and ``reminders check`` print
    (``options``: ``ToolOptions``).
    """

    name: str
    # How far ahead a message may be published (the sweep's horizon), in words.
    max_delay: str
    publisher: Builder
    push_format: Builder | None = None
    push_format_for: Builder | None = None
    consumer: Builder | None = None
    # ``worker_knobs(settings)``: what this pull kind sets in ``reminders worker``'s loop
    # beyond the REMINDERS_WORKER_* defaults (a dict of its fields); raises ``ConfigError``
    # when the kind cannot be consumed as configured.
    worker_knobs: Builder | None = None
    setup: Builder | None = None
    check: Builder | None = None
    # The settings groups (fields of ``Settings``) this kind reads, and the checks the
    # settings run at load time, each ``check(settings)`` raising ``ValueError`` (every
    # kind's checks run; each decides whether its kind is in use). The checks are ``Lazy``
    # too: they read the whole ``Settings``, which imports this module.
    settings: tuple[type[BaseSettings], ...] = field(default=())
    settings_checks: tuple[Builder, ...] = field(default=())
    # The optional extra (``pip install 'reminder-relay[extra]'``, pyproject.toml) whose
    # libraries the kind imports, and the top-level modules of those libraries it imports:
    # the settings refuse the kind, naming the extra, until they are all importable
    # (app/settings/extras.py gathers each extra's modules from its kinds). None and ():
    # the base install has them.
    extra: str | None = None
    extra_modules: tuple[str, ...] = ()

    @property
    def pulled(self) -> bool:
        """True when ``reminders worker`` pulls from it (no push route of its own)."""
        return self.consumer is not None


def lazy(package: str, module: str, function: str) -> Lazy:
    """``Lazy`` for ``package.module.function`` (``package``: the kind's ``__name__``)."""
    return Lazy(f"{package}.{module}", function)
