"""The optional extras (``pip install 'reminder-relay[extra]'``) and what needs each.

The base install runs everything that needs no cloud library; Google, AWS and
OpenTelemetry code is imported only when a configured queue kind or feature uses it (each
queue kind names its extra). The
settings check that the extra is installed before anything imports it, so a missing one is
a single line naming what to install, never an ``ImportError`` traceback.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass


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


GCP = Extra("gcp", ("google.auth", "google.cloud.tasks_v2", "grpc"))
AWS = Extra("aws", ("aiobotocore", "cryptography"))
RABBITMQ = Extra("rabbitmq", ("aio_pika",))
# FastAPI itself installs opentelemetry-api; the extra is the SDK and its exporter.
OTEL = Extra("otel", ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"))

# By the name a queue kind gives as its ``extra`` (app/adapters/queues/kind.py).
EXTRAS: dict[str, Extra] = {extra.name: extra for extra in (GCP, AWS, RABBITMQ, OTEL)}
