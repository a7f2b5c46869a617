"""The settings classes and variables, found from the model itself (never a list kept by
hand): error messages, the documentation check and the unknown-variable check all read
them here, so a new settings group cannot be forgotten by any of them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

from pydantic_settings import BaseSettings


def settings_classes(root: type[BaseSettings]) -> tuple[type[BaseSettings], ...]:
    """``root``, the settings classes it inherits from, and every group nested in its fields:
    each class with variables of its own (not a holder of groups only, such as the queue
    kinds' ``QueueKindGroups``)."""
    found: dict[type[BaseSettings], None] = {}
    _collect(root, found)
    return tuple(cls for cls in found if not _holds_groups_only(cls))


def _holds_groups_only(cls: type[BaseSettings]) -> bool:
    fields = cls.model_fields.values()
    return bool(fields) and all(list(_settings_types(f.annotation)) for f in fields)


def setting_variables(root: type[BaseSettings]) -> frozenset[str]:
    """The environment variable of every field of ``root``, nested groups included."""
    prefix = str(root.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, field in root.model_fields.items():
        nested = list(_settings_types(field.annotation))
        if nested:
            for group in nested:
                names |= setting_variables(group)
        else:
            names.add((prefix + name).upper())
    return frozenset(names)


def _collect(cls: type[BaseSettings], found: dict[type[BaseSettings], None]) -> None:
    if cls in found:
        return
    found[cls] = None
    for base in cls.__mro__[1:]:
        if _is_settings(base) and base is not BaseSettings:
            _collect(base, found)
    for field in cls.model_fields.values():
        for nested in _settings_types(field.annotation):
            _collect(nested, found)


def _settings_types(annotation: Any) -> Iterator[type[BaseSettings]]:
    """The settings classes an annotation names (``X``, ``X | None``, ``list[X]``…)."""
    if _is_settings(annotation):
        yield annotation
    for argument in get_args(annotation):
        yield from _settings_types(argument)


def _is_settings(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, BaseSettings)
