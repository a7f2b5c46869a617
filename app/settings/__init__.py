"""Configuration from the environment (prefix ``REMINDERS_``), built once and passed in."""

import os
from typing import TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from app.settings.catalog import setting_variables, settings_classes
from app.settings.core import Settings
from app.settings.database import DEFAULT_SQLITE_URL, DatabaseSettings
from app.settings.environment import unknown_variables
from app.settings.problems import ConfigurationProblems, describe, explain, merge
from app.settings.secrets import SECRET_FIELDS

__all__ = [
    "DEFAULT_SQLITE_URL",
    "SECRET_FIELDS",
    "SETTINGS_CLASSES",
    "SETTING_VARIABLES",
    "ConfigurationProblems",
    "DatabaseSettings",
    "Settings",
    "explain",
    "read_settings",
]

# Every settings class (so a field error names its variable with the right prefix) and
# every variable, derived from the model's fields.
SETTINGS_CLASSES = settings_classes(Settings)
SETTING_VARIABLES = setting_variables(Settings)
S = TypeVar("S", bound=BaseSettings)


def read_settings(cls: type[S]) -> S:
    """Settings from the environment, or ``ConfigurationProblems`` naming every problem.

    A ``REMINDERS_*`` variable that is no setting is a problem too (a misspelt name would
    otherwise be ignored). pydantic stops before the cross-field checks when a field does
    not parse; those fields are then tried at their defaults, so the checks' problems are
    named too.
    """
    problems = ConfigurationProblems(unknown_variables(os.environ, SETTING_VARIABLES), ())
    try:
        settings = cls()
    except ValidationError as error:
        problems = merge(problems, describe(error, SETTINGS_CLASSES))
        unparsed = {
            str(item["loc"][0])
            for item in error.errors()
            if error.title == cls.__name__ and item["type"] != "value_error" and item["loc"]
        }
    else:
        if problems.problems:
            raise problems
        return settings
    defaults = {
        name: cls.model_fields[name].get_default(call_default_factory=True) for name in unparsed
    }
    if defaults:
        try:
            cls(**defaults)
        except ValidationError as again:
            problems = merge(problems, describe(again, SETTINGS_CLASSES))
    raise problems from None
