"""Adding a queue kind is its package plus its registration in kinds.py: a throwaway kind,
written to a temporary folder and registered by editing a copy of kinds.py the way the
recipe in docs/architecture.md says, is accepted by REMINDERS_QUEUE, has its settings group
read from its REMINDERS_<KIND>_* variables, gets its publisher from the registry and shows
up in the documentation check, with nothing else changed.

It runs in a fresh interpreter: the Settings model is built from the kinds when the
settings are first imported, so the registration must come before that import."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PACKAGE = {
    "__init__.py": """
        from app.adapters.queues.kind import QueueKind, lazy

        from .settings import ThrowawaySettings

        KIND = QueueKind(
            name="throwaway",
            max_delay="1 hour",
            publisher=lazy(__name__, "build", "build_publisher"),
            push_format=lazy("app.adapters.queues", "infrai.build", "build_infrai_push_format"),
            settings=(ThrowawaySettings,),
        )
    """,
    "settings.py": """
        from pydantic_settings import BaseSettings, SettingsConfigDict

        class ThrowawaySettings(BaseSettings):
            model_config = SettingsConfigDict(env_prefix="REMINDERS_THROWAWAY_", extra="ignore")
            topic: str = "default-topic"
    """,
    "build.py": """
        from app.adapters.queues.memory.publisher import build_memory_publisher
        from app.settings import Settings

        from .settings import ThrowawaySettings

        class ThrowawayPublisher:
            def __init__(self, topic):
                self.topic = topic

        def build_publisher(parts):
            settings: Settings = parts.settings
            return ThrowawayPublisher(settings.group(ThrowawaySettings).topic)
    """,
}

# The registration: the one entry the recipe adds to kinds.py (with its package's import).
PROBE = """
import importlib, json, sys, types
from pathlib import Path

import app.adapters.queues as queues

source = Path(queues.__file__).with_name("kinds.py").read_text(encoding="utf-8")
registered = source.replace("    sqs.KIND,\\n)", "    sqs.KIND,\\n    throwaway.KIND,\\n)")
assert registered != source, "kinds.py no longer ends its tuple with sqs.KIND"
anchor = "from .kind import QueueKind\\n"
registered = registered.replace(anchor, anchor + "import throwaway\\n")
kinds = types.ModuleType("app.adapters.queues.kinds")
kinds.__package__ = "app.adapters.queues"
exec(compile(registered, "kinds.py (+ throwaway)", "exec"), kinds.__dict__)
sys.modules["app.adapters.queues.kinds"] = kinds
queues.kinds = kinds

from pydantic import ValidationError
from app.adapters.queues.registry import build_publisher
from app.settings import SETTING_VARIABLES, Settings
from throwaway.settings import ThrowawaySettings

settings = Settings(queue="throwaway", dev_mode=True)
try:
    Settings(queue="kafka", dev_mode=True)
    refused = False
except ValidationError:
    refused = True
publisher = build_publisher(settings)
sys.path.insert(0, "tests/docs")
from test_settings_documented import documented_text
text = documented_text()
print(json.dumps({
    "kinds": list(kinds.KIND_NAMES),
    "topic": settings.group(ThrowawaySettings).topic,
    "attribute": settings.throwaway.topic,
    "kafka_refused": refused,
    "publisher": type(publisher).__name__,
    "publisher_topic": publisher.topic,
    "variables": sorted(v for v in SETTING_VARIABLES if "THROWAWAY" in v),
    "undocumented": sorted(v for v in SETTING_VARIABLES if v not in text),
}))
"""


def _write_package(folder: Path) -> None:
    package = folder / "throwaway"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(textwrap.dedent(text), encoding="utf-8")


def test_a_throwaway_kind_needs_its_package_and_its_registration(tmp_path):
    """REMINDERS_QUEUE=throwaway with REMINDERS_THROWAWAY_TOPIC set: accepted, the group
    read, the publisher built, the new variable seen (and reported undocumented)."""
    _write_package(tmp_path)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{tmp_path}:{ROOT}",
        "REMINDERS_THROWAWAY_TOPIC": "reminders-topic",
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-1500:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["kinds"][-1] == "throwaway"
    assert found["topic"] == found["attribute"] == "reminders-topic"
    assert found["kafka_refused"] is True
    assert found["publisher"] == "ThrowawayPublisher"
    assert found["publisher_topic"] == "reminders-topic"
    assert found["variables"] == ["REMINDERS_THROWAWAY_TOPIC"]
    # The documentation check names what the new kind still lacks: its variable's line.
    assert found["undocumented"] == ["REMINDERS_THROWAWAY_TOPIC"]
