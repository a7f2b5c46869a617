"""The settings classes are found from the model, so every group's bad value is named with
its full ``REMINDERS_…`` variable (a hand-kept list once left out SNS and QStash)."""

from __future__ import annotations

import inspect
import os

import pytest

from app.settings import SETTINGS_CLASSES, ConfigurationProblems, Settings, explain, read_settings

NUMERIC = (int, float)


def _numeric_field(cls: type) -> str:
    """A field declared in ``cls`` that ``abc`` cannot fill."""
    own = inspect.get_annotations(cls)
    return next(n for n, f in cls.model_fields.items() if n in own and f.annotation in NUMERIC)


@pytest.fixture(autouse=True)
def no_reminders_environment(monkeypatch):
    """Each test sees only the variables it sets."""
    for name in list(os.environ):
        if name.startswith("REMINDERS_") and not name.startswith("REMINDERS_TEST_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("REMINDERS_DEV_MODE", "1")


def test_every_nested_group_is_found():
    """Every group nested in Settings' fields is in the derived list, SNS and QStash too."""
    names = {cls.__name__ for cls in SETTINGS_CLASSES}
    nested = {
        f.annotation.__name__
        for f in Settings.model_fields.values()
        if isinstance(f.annotation, type) and f.annotation.__name__.endswith("Settings")
    }
    assert nested <= names
    assert {"SnsSettings", "QStashSettings", "EmbeddedQueueSettings"} <= names


@pytest.mark.parametrize("cls", SETTINGS_CLASSES, ids=lambda cls: cls.__name__)
def test_a_bad_value_of_every_settings_class_names_its_full_variable(cls, monkeypatch):
    """``REMINDERS_QSTASH_RETRIES=abc`` is reported as that variable, not as ``RETRIES``."""
    variable = str(cls.model_config["env_prefix"]) + _numeric_field(cls).upper()
    assert variable.startswith("REMINDERS_")
    monkeypatch.setenv(variable, "abc")
    with pytest.raises(ConfigurationProblems) as caught:
        read_settings(Settings)
    [line] = explain(caught.value)
    assert line.startswith(f"configuration error: {variable}: "), line
