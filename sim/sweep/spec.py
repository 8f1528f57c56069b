"""Sweep files: a base scenario, fixed overrides, and axes; expanded into points.

A sweep file (YAML, safe loader)::

    name: imbalance-zipf           # optional; default: the file's stem
    base: ep8-hot-expert           # shipped scenario name, or a YAML path (relative to this file)
    set:                           # fixed overrides, applied to every point
      workload.layers: 1
    grid:                          # cartesian product, first axis slowest
      router.alpha: [0, 0.5, 1.0, 1.5]
    zip:                           # paired values (equal lengths), one axis together
      fabric.multipath: [ecmp, spray]
      fabric.pxn: [false, false]
    seeds: {count: 3, start: 1}    # or a list [1, 2, 3]; the axis column is ``seed``

Points run in the order grid x zip x seeds. A point's id is a stable hash of its axis values,
so the same sweep always names the same points (that is what resume relies on).

>>> spec = sweep_from_dict({"base": "ep8-balanced", "grid": {"router.alpha": [0, 1]},
...                         "seeds": [1, 2]}, name="demo")
>>> spec.columns
('router.alpha', 'seed')
>>> [p.values for p in spec.points()][:2]
[(('router.alpha', 0), ('seed', 1)), (('router.alpha', 0), ('seed', 2))]
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.io import check_limit, read_yaml, short
from moesim.scenario import Scenario, scenario_from_dict
from moesim.scenario.legacy import convert, is_legacy
from moesim.sweep.paths import check_path, set_path

SWEEP_KEYS = ("name", "description", "base", "set", "grid", "zip", "seeds")
SEED_COLUMN = "seed"


@dataclass(frozen=True)
class Point:
    """One scenario of a sweep: the axis values it sets, in column order."""

    values: tuple[tuple[str, Any], ...]

    @property
    def id(self) -> str:
        """12 hex digits of SHA-1 over the values (JSON, keys sorted): stable across runs."""
        text = json.dumps(dict(self.values), sort_keys=True, default=str)
        return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Axis:
    """Columns that vary together: one column for a grid axis, several for ``zip``."""

    paths: tuple[str, ...]
    steps: tuple[tuple[Any, ...], ...]  # one tuple of values (one per path) per step


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep: the base scenario mapping (with ``set`` applied) and its axes."""

    name: str
    base: str
    scenario: dict[str, Any] = field(compare=False)
    axes: tuple[Axis, ...] = ()
    description: str = ""
    base_path: Path | None = field(default=None, compare=False)  # the base file it read

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(p for axis in self.axes for p in axis.paths)

    @property
    def group_columns(self) -> tuple[str, ...]:
        """The axis columns other than the seed: what Monte Carlo summaries group by."""
        return tuple(c for c in self.columns if c != SEED_COLUMN)

    def points(self) -> list[Point]:
        out = []
        for combo in itertools.product(*(axis.steps for axis in self.axes)):
            values = [pv for axis, step in zip(self.axes, combo, strict=True)
                      for pv in zip(axis.paths, step, strict=True)]
            out.append(Point(tuple(values)))
        return out


def point_mapping(base: Mapping[str, Any], point: Point) -> dict[str, Any]:
    """A copy of the scenario mapping ``base`` with the point's values set."""
    data = copy.deepcopy(dict(base))
    for path, value in point.values:
        set_path(data, path, value)
    return data


def point_scenario(spec: SweepSpec, point: Point) -> Scenario:
    """The validated scenario of ``point`` (ConfigError if its values are not allowed)."""
    return scenario_from_dict(point_mapping(spec.scenario, point), default_name=spec.name)


def load_sweep_file(path: str | Path) -> SweepSpec:
    """Parse a sweep YAML file (see the module docstring)."""
    path = Path(path)
    data = read_yaml(path, "sweep")
    return sweep_from_dict(data, name=path.stem, root=path.parent)


def sweep_from_dict(data: object, name: str = "sweep", root: Path | None = None) -> SweepSpec:
    """Build a sweep from a mapping; relative ``base`` paths resolve against ``root`` first."""
    if not isinstance(data, Mapping):
        raise ConfigError("sweep", f"must be a mapping with keys {', '.join(SWEEP_KEYS)}")
    for key in data:
        if key not in SWEEP_KEYS:
            raise ConfigError(f"sweep.{key}", f"unknown field; allowed: {', '.join(SWEEP_KEYS)}")
    if "base" not in data or not isinstance(data["base"], str):
        raise ConfigError("sweep.base", "required: a shipped scenario name or a YAML path")
    scenario, base_path = _base_mapping(data["base"], root)
    fixed = _mapping(data.get("set", {}), "sweep.set")
    for path, value in fixed.items():
        set_path(scenario, check_path(path), value)
    scenario_from_dict(copy.deepcopy(scenario), default_name=name)  # base + set must be valid
    axes = [Axis((check_path(p),), tuple((v,) for v in _values(vs, f"sweep.grid.{p}")))
            for p, vs in _mapping(data.get("grid", {}), "sweep.grid").items()]
    if data.get("zip"):
        axes.append(_zip_axis(_mapping(data["zip"], "sweep.zip")))
    if data.get("seeds") is not None:
        axes.append(Axis((SEED_COLUMN,), tuple((s,) for s in _seeds(data["seeds"]))))
    _check_unique([p for a in axes for p in a.paths], set(fixed))
    check_limit("sweep_points", math.prod(len(a.steps) for a in axes), "sweep")
    spec = SweepSpec(
        name=_text(data.get("name", name), "sweep.name"),
        base=data["base"],
        scenario=scenario,
        axes=tuple(axes),
        description=_text(data.get("description", ""), "sweep.description"),
        base_path=base_path,
    )
    ids = [p.id for p in spec.points()]
    if len(set(ids)) != len(ids):
        raise ConfigError("sweep", "two points have the same values; remove repeated axis values")
    return spec


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(where, f"must be a string, got {short(value)}")
    return value


def _base_mapping(base: str, root: Path | None) -> tuple[dict[str, Any], Path]:
    from moesim.scenarios import UnknownScenario, resolve

    local = root / base if root is not None else None
    try:
        path = local if local is not None and os.path.lexists(local) else resolve(base)
    except UnknownScenario as exc:
        raise ConfigError("sweep.base", str(exc)) from exc
    data = read_yaml(path, "sweep.base")
    if not isinstance(data, dict):
        raise ConfigError("sweep.base", f"{path} is not a scenario mapping")
    if is_legacy(data):  # an old-language base, converted (silently: the sweep's own notice
        data = convert(data)  # would be a second line beside any error); axes may use old paths
    data.setdefault("name", path.stem)
    return data, path


def _mapping(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(where, "must be a mapping of dotted scenario paths")
    return dict(value)


def _values(value: object, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ConfigError(where, "must be a non-empty list of values")
    return value


def _zip_axis(paths: dict[str, Any]) -> Axis:
    columns = {check_path(p): _values(v, f"sweep.zip.{p}") for p, v in paths.items()}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ConfigError("sweep.zip", f"lists must have equal lengths, got {sorted(lengths)}")
    return Axis(tuple(columns), tuple(zip(*columns.values(), strict=True)))


def _seeds(value: object) -> list[int]:
    """The seed axis: a list of integers >= 0, or {count: N >= 1, start: S >= 0}."""
    seeds: list[int] | None = None
    if isinstance(value, list) and value and all(_is_int(s) for s in value):
        check_limit("seeds", len(value), "sweep.seeds")
        seeds = list(value)
    elif isinstance(value, Mapping) and set(value) <= {"count", "start"}:
        count, start = value.get("count"), value.get("start", 0)
        if _is_int(count) and count >= 1 and _is_int(start):  # type: ignore[operator]
            check_limit("seeds", count, "sweep.seeds")
            seeds = list(range(start, start + count))
    if seeds is None:
        raise ConfigError("sweep.seeds", "must be a list of integers >= 0 or "
                          "{count: N >= 1, start: S >= 0}")
    if min(seeds) < 0:
        raise ConfigError("sweep.seeds", f"seeds must be >= 0 (numpy's seeds are), "
                          f"got {min(seeds)}")
    return seeds


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_unique(paths: list[str], fixed: set[str]) -> None:
    seen: set[str] = set()
    for path in paths:
        if path in seen or path in fixed:
            raise ConfigError(path, "appears twice (in grid, zip, seeds or set); give it once")
        seen.add(path)
