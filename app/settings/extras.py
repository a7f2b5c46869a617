"""The optional extras (``pip install 'reminder-relay[extra]'``) and what needs each.

The base install runs everything that needs no cloud library; Google, AWS, AMQP and
OpenTelemetry code is imported only when a configured queue kind or feature uses it. A
queue kind names its extra and the modules it imports from it (``QueueKind.extra`` and
``extra_modules``), so the queue extras are gathered from the kinds (``queue_extras``);
OpenTelemetry's is here. The settings check that the extra is installed before anything
imports it, so a missing one is a single line naming what to install, never an
``ImportError`` traceback.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Extra:
    """One optional extra and the top-level modules that prove it is installed."""

    name: str
    modules: tuple[str, ...]

    def installed(self) -> bool:
        """True when every module of the extra can be imported."""
        return all(_importable(module) for module in self.modules)

    def hint(self, needed_by: str) -> str:
        """The one line that says what to install (``needed_by``: the setting that asks)."""
        return f"{needed_by} needs: pip install 'reminder-relay[{self.name}]'"


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False


# FastAPI itself installs opentelemetry-api; the extra is the SDK and its exporter.
OTEL = Extra("otel", ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"))


def queue_extras(kinds: Iterable[Any]) -> dict[str, Extra]:
    """Each extra the queue kinds name, with the modules of all the kinds that name it
    (``pip`` installs an extra whole: one kind's missing module means the extra is)."""
    modules: dict[str, dict[str, None]] = {}
    for kind in kinds:
        if kind.extra is not None:
            modules.setdefault(kind.extra, {}).update(dict.fromkeys(kind.extra_modules))
    return {name: Extra(name, tuple(found)) for name, found in modules.items()}
