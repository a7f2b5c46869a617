"""Configuration problems, gathered and told in plain words.

Every check runs (not just the first to fail), so a new deployment learns everything it
must set in one try; secrets that are missing are named together on one line. A
``ValidationError`` from pydantic is turned into lines that name the environment
variable, without pydantic's boilerplate (``Value error,``, model names, URLs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import ValidationError
from pydantic_settings import BaseSettings

DEV_MODE_HINT = "for local use, REMINDERS_DEV_MODE=1 fills every secret with a well-known dev value"
METRICS_HINT = (
    "REMINDERS_METRICS_PUBLIC=true serves /metrics without a token (restrict it at the network)"
)


class MissingSecrets(ValueError):
    """Secrets that are empty or a placeholder, named by their environment variables."""

    def __init__(self, names: Sequence[str], context: str = "") -> None:
        self.names = tuple(names)
        verb = "is empty or a placeholder" if len(self.names) == 1 else "are empty or placeholders"
        suffix = f" ({context})" if context else ""
        super().__init__(f"{', '.join(self.names)} {verb}{suffix}")


class ConfigurationProblems(ValueError):
    """Every problem the settings' checks found, at once."""

    def __init__(self, problems: Sequence[str], missing_secrets: Sequence[str]) -> None:
        self.problems = tuple(problems)
        self.missing_secrets = tuple(missing_secrets)
        lines = list(self.problems)
        if self.missing_secrets:
            lines.insert(0, str(MissingSecrets(self.missing_secrets)))
        super().__init__("\n".join(lines))


def gather(checks: Sequence[Callable[[], object]]) -> None:
    """Run every check; raise one ``ConfigurationProblems`` naming all that failed."""
    problems: list[str] = []
    missing: list[str] = []
    for check in checks:
        try:
            check()
        except MissingSecrets as error:
            missing += error.names
        except ValueError as error:
            problems.append(str(error))
    if problems or missing:
        raise ConfigurationProblems(problems, missing)


def describe(
    error: ValidationError, classes: Sequence[type[BaseSettings]]
) -> ConfigurationProblems:
    """A pydantic error as plain problems: each field error names its variable."""
    prefixes = {cls.__name__: str(cls.model_config.get("env_prefix", "")) for cls in classes}
    problems: list[str] = []
    missing: list[str] = []
    for item in error.errors(include_url=False):
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, ConfigurationProblems):
            problems += cause.problems
            missing += cause.missing_secrets
        elif isinstance(cause, ValueError):
            problems.append(str(cause))
        else:
            variable = prefixes.get(error.title, "") + "_".join(map(str, item["loc"])).upper()
            problems.append(f"{variable}: {item['msg'][0].lower()}{item['msg'][1:]}")
    return ConfigurationProblems(problems, missing)


def merge(first: ConfigurationProblems, second: ConfigurationProblems) -> ConfigurationProblems:
    """Both sets of problems, each named once."""
    problems = list(dict.fromkeys(first.problems + second.problems))
    missing = list(dict.fromkeys(first.missing_secrets + second.missing_secrets))
    return ConfigurationProblems(problems, missing)


def explain(problems: ConfigurationProblems) -> list[str]:
    """The lines to print: the problems, then (for missing secrets) what to do locally.
    Dev mode fills every secret, so missing secrets mean it is off."""
    lines = str(problems).splitlines()
    if len(lines) == 1:
        lines = [f"configuration error: {lines[0]}"]
    else:
        lines = ["configuration errors:", *(f"  {line}" for line in lines)]
    if problems.missing_secrets:
        lines.append(DEV_MODE_HINT)
    if "REMINDERS_METRICS_TOKEN" in problems.missing_secrets:
        lines.append(METRICS_HINT)
    return lines
