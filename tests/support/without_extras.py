"""Run with every optional extra's packages missing, as the base install has them.

``python -m tests.support.without_extras walk`` imports every module of ``app`` and prints
the ones that failed; ``python -m tests.support.without_extras cli ARGS…`` runs the
``reminders`` command. Blocking works as a missing package does: ``import google`` raises
``ImportError`` (``sys.modules[name] = None``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

# The packages of the gcp, aws and otel extras (opentelemetry-api itself comes with FastAPI).
BLOCKED = (
    "google",
    "grpc",
    "aiobotocore",
    "botocore",
    "boto3",
    "cryptography",
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "opentelemetry.instrumentation",
    "aio_pika",
    "aiormq",
    "pika",
)


def block() -> None:
    """Make every optional package unimportable in this process."""
    for name in BLOCKED:
        sys.modules[name] = None  # type: ignore[assignment]


def failing_modules() -> list[str]:
    """Every module of ``app`` that cannot be imported here, with the reason."""
    import app

    failed = []
    for info in pkgutil.walk_packages(app.__path__, "app."):
        try:
            importlib.import_module(info.name)
        except ImportError as error:
            failed.append(f"{info.name}\t{error}")
    return failed


if __name__ == "__main__":
    block()
    if sys.argv[1] == "walk":
        print("\n".join(failing_modules()))
    else:
        from app.cli import main

        sys.argv = ["reminders", *sys.argv[2:]]
        main()
