"""Everything that lists queue kinds is read from the kinds themselves
(``app/adapters/queues/kinds.py``), so a kind added there cannot be missing from any of
them (hand-kept lists beside the kinds once drifted apart)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from app.adapters.queues.consumers import build_consumer
from app.adapters.queues.kind import Lazy, QueueKind
from app.adapters.queues.kinds import KIND_NAMES, QUEUE_KINDS
from app.cli.setup import SETUP_KINDS
from app.domain.errors import ConfigError
from app.settings import SETTINGS_CLASSES, Settings
from app.settings.core import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
BY_NAME = {kind.name: kind for kind in QUEUE_KINDS}


def test_each_kind_is_the_package_of_its_name():
    """``app/adapters/queues/<name>/`` exports the kind called ``<name>``, once."""
    assert len(KIND_NAMES) == len(QUEUE_KINDS)
    for kind in QUEUE_KINDS:
        package = importlib.import_module(f"app.adapters.queues.{kind.name}")
        assert package.KIND is kind


def test_queue_accepts_exactly_the_kinds_names():
    """REMINDERS_QUEUE and the per-channel kinds take the kinds' names and nothing else."""
    for field in ("queue", "email_queue_kind", "webhook_queue_kind"):
        annotation = Settings.model_fields[field].annotation
        accepted = {
            value
            for part in (annotation, *get_args(annotation))
            for value in get_args(part)
            if isinstance(value, str)
        }
        assert accepted == set(KIND_NAMES), field
    with pytest.raises(ValidationError, match="queue"):
        Settings(queue="kafka", dev_mode=True)


def test_every_kinds_settings_class_is_a_group_of_the_settings():
    """A kind's settings class is nested in Settings, so the catalog (error messages, the
    documentation check) knows its variables."""
    nested = {field.annotation for field in Settings.model_fields.values()}
    for kind in QUEUE_KINDS:
        for cls in kind.settings:
            assert cls in nested, f"{kind.name}: {cls.__name__} is not a field of Settings"
            assert cls in SETTINGS_CLASSES


def test_every_kind_names_a_known_extra():
    """The extra a kind names is one the settings can check for (and pyproject defines)."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for kind in QUEUE_KINDS:
        if kind.extra is not None:
            assert kind.extra in EXTRAS, kind.name
            assert f"\n{kind.extra} = [" in pyproject, kind.extra


def test_the_queue_extras_are_gathered_from_the_kinds():
    """Each extra a kind names is checked by the modules its kinds import from it, and no
    queue extra exists that no kind names (OpenTelemetry's is the one other)."""
    named = {kind.extra for kind in QUEUE_KINDS if kind.extra is not None}
    assert set(EXTRAS) == named | {"otel"}
    for kind in QUEUE_KINDS:
        assert bool(kind.extra) == bool(kind.extra_modules), kind.name
        if kind.extra is not None:
            assert set(kind.extra_modules) <= set(EXTRAS[kind.extra].modules), kind.name


def _lazies(kind: QueueKind) -> list[Lazy]:
    builders = [kind.publisher, kind.push_format, kind.push_format_for, kind.consumer]
    builders += [kind.setup, kind.check, *kind.settings_checks]
    return [b for b in builders if isinstance(b, Lazy)]


@pytest.mark.parametrize("kind", QUEUE_KINDS, ids=lambda kind: kind.name)
def test_every_lazy_builder_names_a_function_that_exists(kind):
    """Each lazy reference names a module and a top-level function in it (read, not
    imported: a wrong name would only show when that kind is first configured)."""
    lazies = _lazies(kind)
    assert lazies, kind.name
    for lazy in lazies:
        spec = importlib.util.find_spec(lazy.module)
        assert spec is not None and spec.origin is not None, lazy.module
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert lazy.function in defined, f"{lazy.module}.{lazy.function}"


def test_a_kind_pushes_or_is_pulled():
    """Every kind either has a push route (a push format) or a pull consumer."""
    for kind in QUEUE_KINDS:
        assert kind.push_format or kind.push_format_for or kind.consumer, kind.name


def test_the_worker_pulls_exactly_the_kinds_with_a_consumer():
    """``reminders worker --queue K`` refuses a push-only kind, naming the pull kinds."""
    pulled = sorted(kind.name for kind in QUEUE_KINDS if kind.consumer is not None)
    assert pulled == ["infrai", "rabbitmq", "sqs"]
    with pytest.raises(ConfigError, match=", ".join(pulled)):
        build_consumer("sns", Settings(dev_mode=True))


def test_setup_offers_the_kinds_with_a_setup():
    """``reminders setup --queue`` takes each kind with a setup step, Infrai's included."""
    assert set(SETUP_KINDS) == {k.name for k in QUEUE_KINDS if k.setup}
    assert "infrai" in SETUP_KINDS


def test_the_documentation_names_every_kind():
    """docs/architecture.md's table of kinds and a docs/queues page (or the embedded and
    memory queues' mention) cover each kind."""
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for kind in QUEUE_KINDS:
        assert f"| `{kind.name}` |" in architecture, kind.name
        page = ROOT / "docs" / "queues" / f"{kind.name}.md"
        assert page.exists() or kind.name == "memory", kind.name


def test_each_kind_package_imports_first_in_a_fresh_interpreter():
    """The settings import the kinds while they load: a kind's package imported before
    anything else must not come back to a half-loaded settings package."""
    modules = [f"app.adapters.queues.{kind.name}" for kind in QUEUE_KINDS]
    modules += ["app.adapters.queues.embedded.dispatcher", "app.adapters.queues.kinds"]
    for module in modules:
        result = subprocess.run(
            [sys.executable, "-c", f"import {module}; import app.settings"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, f"{module}: {result.stderr[-600:]}"


def test_a_pull_kind_sets_its_own_worker_knobs():
    """``reminders worker`` takes Infrai's batch size from its kind, and refuses Infrai
    without an API key; other kinds keep the REMINDERS_WORKER_* defaults."""
    from app.adapters.queues.infrai.settings import InfraiSettings
    from app.cli.worker import worker_config

    infrai = InfraiSettings(api_key="k" * 40, worker_max_messages=7)
    settings = Settings(dev_mode=True, queue="infrai", infrai=infrai)
    assert worker_config(settings, "infrai", ("reminders",)).max_messages == 7
    assert worker_config(settings, "sqs", ("reminders",)).max_messages != 7
    keyless = Settings(dev_mode=True, queue="infrai")
    with pytest.raises(ConfigError, match="REMINDERS_INFRAI_API_KEY is not set"):
        worker_config(keyless, "infrai", ("reminders",))


def test_the_typed_groups_of_settings_are_groups_the_kinds_provide():
    """The TYPE_CHECKING lines of Settings (types for mypy) name only fields built from the
    kinds' settings classes, each with that class: they cannot drift from the kinds."""
    from app.settings.core import group_name

    tree = ast.parse((ROOT / "app" / "settings" / "core.py").read_text(encoding="utf-8"))
    [settings] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings"]
    [typed] = [n for n in settings.body if isinstance(n, ast.If)]
    declared = {
        line.target.id: ast.unparse(line.annotation)
        for line in typed.body
        if isinstance(line, ast.AnnAssign) and isinstance(line.target, ast.Name)
    }
    built = {group_name(cls): cls.__name__ for kind in QUEUE_KINDS for cls in kind.settings}
    assert declared.items() <= built.items()
    for name, cls_name in built.items():
        assert type(getattr(Settings(dev_mode=True), name)).__name__ == cls_name
