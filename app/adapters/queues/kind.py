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

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

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


@dataclass(frozen=True, slots=True)
class QueueKind:
    """One queue kind: its name, settings, builders and tools.

    ``publisher(parts)`` builds the publisher. A push kind has ``push_format(parts)``
    (built once per kind, shared by its queues so caches of fetched keys stay warm) or
    ``push_format_for(parts, queue)`` (one per queue: QStash's signature names the
    queue's URL); a pull kind has ``consumer(settings, http)`` for ``reminders worker``.
    ``setup(settings, http)`` and ``check(settings, http)`` are coroutines returning rows
    for ``reminders setup`` and ``reminders check``.
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
    # The optional extra (``pip install 'reminder-relay[extra]'``, app/settings/extras.py)
    # whose libraries the kind imports; None: the base install has them.
    extra: str | None = None

    @property
    def pulled(self) -> bool:
        """True when ``reminders worker`` pulls from it (no push route of its own)."""
        return self.consumer is not None


def lazy(package: str, module: str, function: str) -> Lazy:
    """``Lazy`` for ``package.module.function`` (``package``: the kind's ``__name__``)."""
    return Lazy(f"{package}.{module}", function)
