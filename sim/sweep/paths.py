"""Dotted paths into a scenario mapping (``router.alpha``, ``fabric.params.oversubscription``).

A path names a field of the scenario YAML schema (see ``sim/scenario/load.py``). It is checked
against that schema before any point runs, so a typo fails the whole sweep at once, naming it;
a *value* that the scenario rejects fails only its own point.

>>> data = {"model": "mixtral-8x7b", "router": {"kind": "hot"}}
>>> set_path(data, "router.hot_factor", 8.0)
>>> data["router"]
{'kind': 'hot', 'hot_factor': 8.0}
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from moesim.errors import ConfigError
from moesim.io import short
from moesim.model import get_model
from moesim.model.config import MODEL_FIELDS
from moesim.parallel.layout import ParallelLayout
from moesim.router import RouterConfig
from moesim.scenario.load import FABRIC_KEYS, HARDWARE_KEYS, TOP_KEYS
from moesim.scenario.spec import Placement, Workload

SCALAR_TOPS = ("version", "name", "description", "seed", "mode", "schedule")


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _builder_params() -> list[str]:
    from moesim.topologies.registry import TOPOLOGIES

    names = {p for b in TOPOLOGIES.values() for p in inspect.signature(b).parameters}
    return sorted(names)


def _children(top: str) -> list[str]:
    """Fields allowed one level below ``top`` (empty: ``top`` is a leaf)."""
    return {
        "model": [*MODEL_FIELDS, "first_k_dense"],
        "workload": _fields(Workload),
        "layout": _fields(ParallelLayout),
        "placement": _fields(Placement),
        "hardware": HARDWARE_KEYS,
        "router": _fields(RouterConfig),
        "fabric": FABRIC_KEYS,
    }.get(top, [])


LEGACY_PATHS = {
    "gpu": ("hardware.gpu",),
    "workload.ep": ("layout.ep", "layout.dp"),  # one EP group: dp = ep
    "workload.first_gpu": ("placement.first_gpu",),
    "workload.gpu_stride": ("placement.gpu_stride",),
}
"""Paths of the old layer-stack language that sweep files may still name (the column keeps the
name the file gives): where the one language keeps each (``slow_gpus.N`` likewise goes to
``hardware.slow_gpus.N``)."""


def new_paths(path: str) -> tuple[str, ...]:
    """The one language's paths that an old-language ``path`` sets (itself if not old)."""
    if path.startswith("slow_gpus."):
        return (f"hardware.{path}",)
    return LEGACY_PATHS.get(path, (path,))


def check_path(path: object) -> str:
    """``path`` if it addresses a scenario field, else ConfigError naming it."""
    if not isinstance(path, str) or not path:
        raise ConfigError("sweep", f"axis path must be a dotted string, got {short(path)}")
    for new in new_paths(path):
        if new != path:
            _check_path(new)
    return path if new_paths(path) != (path,) else _check_path(path)


def _check_path(path: str) -> str:
    parts = path.split(".")
    if parts[0] not in TOP_KEYS:
        tops = ", ".join(TOP_KEYS)
        raise ConfigError(path, f"unknown scenario field {short(parts[0])}; allowed: {tops}")
    if len(parts) == 1:
        return path
    top, rest = parts[0], parts[1:]
    if path.startswith("hardware.slow_gpus.") and len(rest) == 2 and rest[1].isdigit():
        return path
    if top == "fabric" and rest[0] == "params" and len(rest) == 2:
        if rest[1] not in _builder_params():
            raise ConfigError(
                path, f"unknown topology parameter; allowed: {', '.join(_builder_params())}"
            )
        return path
    allowed = _children(top)
    if not allowed or len(rest) != 1 or rest[0] not in allowed:
        hint = f"allowed below {top}: {', '.join(allowed)}" if allowed else f"{top} has no fields"
        raise ConfigError(path, f"unknown scenario field; {hint}")
    return path


def set_path(data: dict[str, Any], path: str, value: object) -> None:
    """Set ``path`` in the scenario mapping ``data`` in place (creating mappings on the way).

    ``model.<field>`` on a preset model name first expands the preset into its fields; an old
    path (:data:`LEGACY_PATHS`) sets where the one language keeps that field.
    """
    if new_paths(path) != (path,):
        for new in new_paths(path):
            set_path(data, new, value)
        return
    parts = path.split(".")
    if parts[0] == "model" and len(parts) == 2 and not isinstance(data.get("model"), dict):
        preset = get_model(str(data.get("model", "mixtral-8x7b")))
        data["model"] = dataclasses.asdict(preset)
    node = data
    for key in parts[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    leaf: object = parts[-1]
    if parts[:2] == ["hardware", "slow_gpus"] and len(parts) == 3:
        leaf = int(parts[-1])
    node[leaf] = value  # type: ignore[index]
