"""Build frozen dataclasses from YAML mappings, naming any bad field exactly.

Unknown keys, wrong types and missing required keys raise ``ConfigError`` with
the dotted field path (``scenario.workload.ep``) and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from moesim.errors import ConfigError
from moesim.io import short

T = TypeVar("T")

_TYPE_NAMES = {bool: "true/false", int: "an integer", float: "a number", str: "a string"}


def check_keys(data: object, allowed: list[str], where: str) -> Mapping[str, Any]:
    """``data`` must be a mapping whose keys are all in ``allowed``."""
    if not isinstance(data, Mapping):
        raise ConfigError(where, f"must be a mapping with keys {', '.join(allowed)}")
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}", f"unknown field; allowed: {', '.join(allowed)}")
    return data


def check_type(value: object, kind: type, where: str) -> Any:
    """``value`` as ``kind`` (int accepted where a float is wanted; bools are not numbers)."""
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        wanted = _TYPE_NAMES.get(kind, kind.__name__)
        raise ConfigError(where, f"must be {wanted}, got {short(value)}")
    return value


def build_plain(cls: type[T], data: object, where: str) -> T:
    """``cls(**data)`` for a dataclass whose fields are plain scalars (type = default's type).

    Fields whose default is None accept a number or null.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    mapping = check_keys(data, list(fields), where)
    kwargs: dict[str, Any] = {}
    for key, value in mapping.items():
        default = fields[key].default
        if default is None or default is dataclasses.MISSING:
            kwargs[key] = value if value is None else check_type(value, float, f"{where}.{key}")
        else:
            kwargs[key] = check_type(value, type(default), f"{where}.{key}")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(where, str(exc)) from exc
